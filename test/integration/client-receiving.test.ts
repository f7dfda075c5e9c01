// docs/receiving.md's receivers (node:http, fastify, Express) run as a user would copy them: each
// snippet is written out as an .mjs file (under node_modules/.cache, so that it resolves
// @fermata/client, fastify and express as an app's would), started, and sent a real signed
// delivery by a real `fermata serve`: the receiver must verify it (printing the timer's id and
// payload) and refuse a request signed with another secret with 401.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { FermataClient } from '@fermata/client';
import { Webhook } from 'standardwebhooks';
import { closedPort } from '../helpers/client-suite.ts';
import { testScratch } from '../helpers/scratch.ts';
import { type Service, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const snippetDir = `${root}node_modules/.cache/fermata-receiving-docs`;
const scratch = testScratch('fermata-client-receiving');
const secret = `whsec_${randomBytes(32).toString('base64')}`;

/** The docs' snippets by name (`<!-- receiver:NAME -->` before a js code block). */
function snippets(): Map<string, string> {
  const text = readFileSync(`${root}docs/receiving.md`, 'utf8');
  return new Map([...text.matchAll(/<!-- receiver:([a-z-]+) -->\n```js\n([\s\S]*?)```/g)].map((match) => [match[1] as string, match[2] as string]));
}

/** Starts a snippet on `port`; resolves with a function that waits for a line of its output matching `pattern`. */
function startReceiver(name: string, code: string, port: number): { child: ChildProcess; line: (pattern: RegExp) => Promise<string> } {
  mkdirSync(snippetDir, { recursive: true });
  const file = `${snippetDir}/${name}.mjs`;
  writeFileSync(file, code);
  const child = spawn(process.execPath, [file], { env: { ...process.env, PORT: String(port), FERMATA_SIGNING_SECRETS: secret }, stdio: ['ignore', 'pipe', 'pipe'] });
  scratch.children.add(child);
  let output = '';
  const waiters: Array<() => void> = [];
  const collect = (chunk: Buffer): void => {
    output += chunk.toString('utf8');
    for (const wake of waiters.splice(0)) wake();
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const line = (pattern: RegExp): Promise<string> =>
    withTimeout(
      (async () => {
        for (;;) {
          const found = output.split('\n').find((text) => pattern.test(text));
          if (found !== undefined) return found;
          await new Promise<void>((wake) => waiters.push(wake));
        }
      })(),
      20_000,
      `${name} to print ${pattern}`,
    );
  return { child, line };
}

/** POSTs until the receiver listens (it has just started); the answer's status. */
async function post(url: string, headers: Record<string, string>, body: string): Promise<number> {
  for (let tries = 0; ; tries++) {
    try {
      return (await fetch(url, { method: 'POST', headers, body })).status;
    } catch (err) {
      if (tries > 100) throw err;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

describe('docs/receiving.md: each receiver verifies a real delivery', { timeout: 120_000 }, () => {
  let service: Service;
  let client: FermataClient;
  before(async () => {
    service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child), { env: { FERMATA_SIGNING_SECRETS: secret } });
    client = new FermataClient({ url: service.url });
  });
  after(() => client.close());

  test('the page has the three receivers', () => {
    assert.deepEqual([...snippets().keys()], ['node-http', 'fastify', 'express']);
  });

  for (const name of ['node-http', 'fastify', 'express']) {
    test(name, async () => {
      const port = await closedPort();
      const url = `http://127.0.0.1:${port}/hook`;
      const receiver = startReceiver(name, snippets().get(name) as string, port);
      try {
        const forged = new Webhook(`whsec_${randomBytes(32).toString('base64')}`).sign('forged', new Date(), 'hello');
        const status = await post(url, { 'webhook-id': 'forged', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': forged, 'content-type': 'application/json' }, 'hello');
        assert.equal(status, 401, 'a request signed with another secret is refused');
        const { id } = await client.add({ delay_ms: 0, target: url, payload: `{"from":"${name}"}`, headers: { 'content-type': 'application/json' } });
        assert.equal(await receiver.line(/^timer /), `timer ${id}, attempt 1: {"from":"${name}"}`);
        await withTimeout(
          (async () => {
            while ((await client.get(id)).state !== 'delivered') await new Promise((resolve) => setTimeout(resolve, 50));
          })(),
          10_000,
          'the delivery to be settled as delivered',
        );
      } finally {
        receiver.child.kill('SIGKILL');
      }
    });
  }
});
