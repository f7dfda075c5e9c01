// What a start of `fermata serve` loads: the modules of its start path, imported in a fresh
// process, leave node's undici (fetch's implementation) unloaded. An ES import of node:http
// loads it (its module facade reads lazy getters), some 25 ms of main-thread CPU a start;
// fermata takes node:http from runtime/node-http.ts instead (decision 0033).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

const startPath = ['cli/serve/service-life.ts', 'cli/serve/cluster-service.ts', 'ingest/http/server.ts', 'dispatch/delivery-pool.ts', 'dispatch/origin-clients.ts'];

test("the modules a start loads leave undici unloaded: none imports node:http as an ES module", () => {
  const root = new URL('../../', import.meta.url).href;
  const script = `for (const path of ${JSON.stringify(startPath)}) await import(new URL(path, ${JSON.stringify(root)}).href);
console.log(JSON.stringify(process.moduleLoadList.filter((name) => /undici/.test(name))));`;
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(child.status, 0, child.stderr);
  assert.deepEqual(JSON.parse(child.stdout.trim().split('\n').at(-1) ?? '[]'), [], 'undici was loaded by the start path');
});
