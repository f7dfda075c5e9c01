// `fermata bench` as a user runs it (bin/fermata.js in a child process) against the real
// `fermata serve` (another child, port 0): what it says it got acknowledged and delivered must
// be exactly what the server's /v1/stats counts, in each mode and loop; bad flags exit 2
// naming the flag. Every run is bounded in time; children are killed in `after`.
import assert from 'node:assert/strict';
import { type ChildProcess, execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { binPath, type Service, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';

const runTimeoutMs = 60_000;
const statsWaitMs = 20_000;

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function runBench(args: readonly string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [binPath, 'bench', ...args], { encoding: 'utf8', timeout: runTimeoutMs, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
      resolve({ code, stdout, stderr });
    });
  });
}

type Figures = ReadonlyMap<string, number>;

async function benchFigures(args: readonly string[]): Promise<Figures> {
  const run = await runBench([...args, '--json']);
  assert.equal(run.code, 0, `fermata bench ${args.join(' ')} exited ${run.code}:\n${run.stderr}\n${run.stdout}`);
  const figures = new Map<string, number>();
  for (const line of run.stdout.trim().split('\n')) {
    const figure = JSON.parse(line) as { suite: string; name: string; value: number; unit: string };
    assert.equal(figure.suite, 'bench');
    figures.set(figure.name, figure.value);
  }
  return figures;
}

function value(figures: Figures, name: string): number {
  const found = figures.get(name);
  assert.ok(found !== undefined, `the output has ${name}`);
  return found;
}

interface Stats {
  readonly pending: number;
  readonly delivered: number;
  readonly dead: number;
}

async function stats(service: Service): Promise<Stats> {
  const response = await fetch(`${service.url}/v1/stats`);
  assert.equal(response.status, 200);
  return (await response.json()) as Stats;
}

describe('fermata bench against fermata serve', () => {
  let service: Service;
  let child: ChildProcess | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'fermata-bench-cli-'));

  before(async () => {
    service = await startService(join(dir, 'data'), (spawned) => (child = spawned));
  });

  after(() => {
    child?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  // The runs share one server, so each checks the counts it added to the previous ones.
  let acked = 0;

  test('json, closed loop: every acknowledged add is pending on the server', async () => {
    const figures = await benchFigures(['--url', service.url, '--duration', '2s', '--concurrency', '32']);
    assert.equal(value(figures, 'bench.errors'), 0);
    assert.equal(value(figures, 'bench.unanswered'), 0);
    const timers = value(figures, 'bench.timers.acked');
    assert.ok(timers > 0, 'some adds were acknowledged');
    assert.equal(value(figures, 'bench.requests.ok'), timers, 'one timer a request');
    assert.equal(value(figures, 'bench.requests.sent'), timers);
    assert.ok(value(figures, 'bench.ack_latency_ms.p50') > 0);
    acked += timers;
    assert.equal((await stats(service)).pending, acked);
  });

  test('arrow, closed loop: batches of rows, counted in timers', async () => {
    const figures = await benchFigures(['--url', service.url, '--mode', 'arrow', '--batch-rows', '500', '--duration', '2s', '--concurrency', '4']);
    assert.equal(value(figures, 'bench.errors'), 0);
    const timers = value(figures, 'bench.timers.acked');
    assert.equal(timers, value(figures, 'bench.requests.ok') * 500);
    assert.ok(timers > 0);
    acked += timers;
    assert.equal((await stats(service)).pending, acked);
  });

  test('ndjson, open loop: every request due in the run is sent, none left over', async () => {
    // 20 requests a second for 2 s: 40 due, whatever the server's pace.
    const figures = await benchFigures(['--url', service.url, '--mode', 'ndjson', '--batch-rows', '50', '--rate', '20', '--duration', '2s', '--concurrency', '8']);
    assert.equal(value(figures, 'bench.requests.sent'), 40);
    assert.equal(value(figures, 'bench.unsent'), 0);
    assert.equal(value(figures, 'bench.requests.ok'), 40);
    assert.equal(value(figures, 'bench.timers.acked'), 40 * 50);
    acked += 40 * 50;
    assert.equal((await stats(service)).pending, acked);
  });

  test('stream, closed loop on two add streams: every acknowledged line is pending on the server', async () => {
    const figures = await benchFigures(['--url', service.url, '--mode', 'stream', '--duration', '2s', '--concurrency', '64', '--connections', '2']);
    assert.equal(value(figures, 'bench.errors'), 0);
    assert.equal(value(figures, 'bench.unanswered'), 0);
    const timers = value(figures, 'bench.timers.acked');
    assert.ok(timers > 0, 'some adds were acknowledged');
    assert.equal(value(figures, 'bench.requests.sent'), timers, 'every line sent was answered 2xx');
    acked += timers;
    assert.equal((await stats(service)).pending, acked);
  });

  test('stream, open loop: every line due in the run is sent and answered', async () => {
    // 500 lines a second for 2 s: 1,000 due.
    const figures = await benchFigures(['--url', service.url, '--mode', 'stream', '--rate', '500', '--duration', '2s', '--concurrency', '16']);
    assert.equal(value(figures, 'bench.requests.sent'), 1000);
    assert.equal(value(figures, 'bench.unsent'), 0);
    assert.equal(value(figures, 'bench.timers.acked'), 1000);
    acked += 1000;
    assert.equal((await stats(service)).pending, acked);
  });

  test('--sink --spread 0s: every acknowledged timer is delivered to the sink, and the server counts each once', async () => {
    const figures = await benchFigures(['--url', service.url, '--sink', '--spread', '0s', '--duration', '2s', '--concurrency', '16', '--wait', '30s']);
    assert.equal(value(figures, 'bench.errors'), 0);
    const timers = value(figures, 'bench.timers.acked');
    assert.ok(timers > 0);
    assert.equal(value(figures, 'bench.delivered'), timers, 'the sink got every acknowledged timer');
    assert.equal(value(figures, 'bench.undelivered'), 0);
    assert.equal(value(figures, 'bench.early'), 0, 'no delivery before its fire time');
    assert.ok(value(figures, 'bench.lateness_ms.max') >= value(figures, 'bench.lateness_ms.p50'));
    // The server counts a delivery once its outcome is durable, a moment after the sink answered.
    const deadline = Date.now() + statsWaitMs;
    let counts = await stats(service);
    while (counts.delivered < timers && Date.now() < deadline) {
      await sleep(20);
      counts = await stats(service);
    }
    assert.equal(counts.delivered, timers);
    assert.equal(counts.dead, 0);
    assert.equal(counts.pending, acked, 'the far-future timers of the earlier runs are still pending, and nothing else');
  });
});

describe('fermata bench usage errors', () => {
  for (const [args, named] of [
    [['--rate', '0'], '--rate'],
    [['--mode', 'json', '--batch-rows', '10'], '--batch-rows'],
    [['--mode', 'stream', '--batch-rows', '10'], '--batch-rows'],
    [['--spread', '30d..1h'], '--spread'],
    [['--sink', '--target', 'https://example.com/'], '--target'],
    [['--mode', 'xml'], '--mode'],
  ] as const) {
    test(`${args.join(' ')} exits 2 naming ${named}`, async () => {
      const run = await withTimeout(runBench(args), runTimeoutMs, 'fermata bench');
      assert.equal(run.code, 2);
      assert.match(run.stderr, new RegExp(`^fermata bench: ${named} `));
      assert.equal(run.stdout, '');
    });
  }
});
