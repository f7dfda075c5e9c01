// What `fermata serve` does to start quickly, and that nothing of it shows later. The launcher
// turns on Node's compile cache (bin/compile-cache.js), and the service writes what its start
// compiled into it once it serves, not only at exit.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { testScratch } from '../helpers/scratch.ts';
import { startService } from '../helpers/service.ts';

const scratch = testScratch('fermata-serve-start');
/** The cache is written just after the "listening" and "dispatching" lines; a loaded machine may take a while. */
const cacheWaitMs = 20_000;

function filesUnder(dir: string): number {
  try {
    return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile()).length;
  } catch {
    return 0;
  }
}

test("the launcher turns on Node's compile cache, and the running service writes its start's modules into it", { timeout: 60_000 }, async () => {
  const cacheDir = join(scratch.tempDir('cache'), 'compile-cache');
  const service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child), { env: { NODE_COMPILE_CACHE: cacheDir } });
  try {
    const deadline = Date.now() + cacheWaitMs;
    // Hundreds of modules (the service's TypeScript, fastify, the engine): more than a few written means the start's graph was.
    while (filesUnder(cacheDir) < 100 && Date.now() < deadline) await sleep(50);
    assert.ok(filesUnder(cacheDir) >= 100, `the cache holds ${filesUnder(cacheDir)} files`);
    assert.equal(service.child.exitCode, null, 'written while the service runs, not at its exit');
  } finally {
    service.child.kill('SIGTERM');
    await service.exited;
  }
});
