// h2load, nghttp2's load generator (a client no one here wrote), against the real `fermata
// serve`: 2,000 one-timer JSON adds on 4 HTTP/2 connections with 32 streams each, then 200 over
// HTTP/1.1 (--h1). Every request must succeed with a 2xx, and /v1/stats must count every one of
// them as pending: no add is lost or answered without being stored. Skips, saying so, where
// h2load is not installed (under CI, where .ci/run installs it, a missing one fails). Bounded in count and time.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runH2load } from '../../bench/h2load.ts';
import { startService } from '../helpers/service.ts';
import { toolOrSkip } from '../helpers/tools.ts';

const h2loadTimeoutMs = 60_000;
const children = new Set<ChildProcess>();
const scratch: string[] = [];

after(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

async function pending(url: string): Promise<number> {
  const response = await fetch(`${url}/v1/stats`, { signal: AbortSignal.timeout(5_000) });
  assert.equal(response.status, 200);
  return ((await response.json()) as { pending: number }).pending;
}

test('h2load: 2,000 JSON adds over HTTP/2 (4 connections × 32 streams) and 200 over HTTP/1.1 all succeed, and all are stored', { timeout: 150_000 }, async (t) => {
  if (toolOrSkip(t, 'h2load') === undefined) return;
  const dir = mkdtempSync(join(tmpdir(), 'fermata-h2load-'));
  scratch.push(dir);
  const body = join(dir, 'timer.json');
  writeFileSync(body, JSON.stringify({ delay_ms: 3_600_000, target: 'https://example.com/hook', payload: 'p'.repeat(128) }));
  const service = await startService(join(dir, 'data'), (child) => children.add(child));
  try {
    assert.equal(await pending(service.url), 0);
    const common = ['-d', body, '-H', 'content-type: application/json'];

    const h2 = await runH2load(['-n', '2000', '-c', '4', '-m', '32', ...common, `${service.url}/v1/timers`], h2loadTimeoutMs);
    assert.equal(h2.summary.protocol, 'h2c', h2.output);
    assert.deepEqual(
      [h2.summary.succeeded, h2.summary.status2xx, h2.summary.failed, h2.summary.errored, h2.summary.timeout],
      [2000, 2000, 0, 0, 0],
      h2.output,
    );
    assert.equal(await pending(service.url), 2000);

    const h1 = await runH2load(['--h1', '-n', '200', '-c', '4', ...common, `${service.url}/v1/timers`], h2loadTimeoutMs);
    assert.equal(h1.summary.protocol, 'http/1.1', h1.output);
    assert.deepEqual([h1.summary.succeeded, h1.summary.status2xx], [200, 200], h1.output);
    assert.equal(await pending(service.url), 2200);
  } finally {
    service.child.kill('SIGKILL');
  }
});
