// Arrow ingest as a client no one here wrote speaks it: pyarrow (in a cached venv, see
// test/helpers/python-venv.ts) runs test/fixtures/pyarrow_client.py against the real
// `fermata serve` on port 0, posting IPC streams in the column layout of docs/api.md and reading Arrow
// answers back with pa.ipc.open_stream. This test then checks the script's summary against the
// service with fetch. No python3 or no reachable package index: skipped, saying which. Every wait
// is bounded; the service is killed in `finally`.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ensureVenv, run } from '../helpers/python-venv.ts';
import { skipOrFail } from '../helpers/tools.ts';
import { type Service, startService } from '../helpers/service.ts';
import { startH2Sink } from '../helpers/sinks.ts';
import { withTimeout } from '../helpers/timeout.ts';

const clientScript = fileURLToPath(new URL('../fixtures/pyarrow_client.py', import.meta.url));
const readerScript = fileURLToPath(new URL('../fixtures/pyarrow_read_batches.py', import.meta.url));
const scriptTimeoutMs = 120_000;
const requestTimeoutMs = 10_000;
const installTimeoutMs = 10 * 60_000;
const arrowType = 'application/vnd.apache.arrow.stream';

interface SentRow {
  readonly fire_at_ms: number;
  readonly key: string;
  readonly queue: string;
}

interface ScriptAnswer {
  readonly status: number;
  readonly content_type: string | null;
  readonly schema?: Array<[string, string]>;
  readonly rows?: number;
  readonly ids?: string[];
  readonly duplicates?: boolean[];
  readonly body?: string;
}

interface Summary {
  readonly pyarrow: string;
  readonly small: { sent: SentRow[]; first: ScriptAnswer; again: ScriptAnswer };
  readonly big: { schema: Array<[string, string]>; batches: number; sent: SentRow[]; first: ScriptAnswer };
  readonly int64: { sent: SentRow[]; first: ScriptAnswer; again: ScriptAnswer };
  readonly bad_float_fire_at: ScriptAnswer;
  readonly bad_unknown_column: ScriptAnswer;
}

/** An Arrow answer of `rows` rows: schema id: string, duplicate: bool, state: string, differs: list<string>, revision: uint32; returns its ids. */
function arrowIds(answer: ScriptAnswer, rows: number, duplicate: boolean, what: string): string[] {
  assert.equal(answer.status, 201, `${what}: ${JSON.stringify(answer)}`);
  assert.equal(answer.content_type, arrowType, what);
  assert.deepEqual(answer.schema, [
    ['id', 'string'],
    ['duplicate', 'bool'],
    ['state', 'string'],
    ['differs', 'list<item: string not null>'],
    ['revision', 'uint32'],
  ]);
  assert.equal(answer.rows, rows, what);
  assert.equal(answer.ids?.length, rows, what);
  assert.deepEqual(answer.duplicates, new Array<boolean>(rows).fill(duplicate), `${what}: duplicate column`);
  return answer.ids ?? [];
}

/** A 400 JSON error of code BATCH_INVALID that names `column`. */
function assertRefused(answer: ScriptAnswer, column: string): void {
  assert.equal(answer.status, 400, JSON.stringify(answer));
  assert.match(answer.content_type ?? '', /^application\/json/);
  const body = JSON.parse(answer.body ?? '') as { error: { code: string; message: string; column?: string } };
  assert.equal(body.error.code, 'BATCH_INVALID');
  assert.equal(body.error.column, column, `the error names ${column}: ${answer.body}`);
  assert.match(body.error.message, new RegExp(column));
}

async function getJson(base: string, path: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${base}${path}`, { signal: AbortSignal.timeout(requestTimeoutMs) });
  return { status: response.status, body: JSON.parse(await response.text()) };
}

test('pyarrow posts Arrow IPC streams (ms+UTC, us, int64 ms; string and dictionary targets) and reads the Arrow ids back', { timeout: installTimeoutMs + 5 * 60_000 }, async (t) => {
  const started = performance.now();
  const venv = await ensureVenv(['pyarrow'], { installTimeoutMs });
  if ('skip' in venv) return skipOrFail(t, `pyarrow client not run: ${venv.skip}`);
  t.diagnostic(`${venv.reused ? 'reused' : 'built'} the pyarrow venv in ${Math.round(performance.now() - started)} ms (${venv.python})`);

  const dataDir = mkdtempSync(join(tmpdir(), 'fermata-pyarrow-'));
  let service: Service | undefined;
  try {
    service = await startService(dataDir);
    const base = service.url;
    const script = await run(venv.python, [clientScript, base, String(process.pid)], scriptTimeoutMs, 'pyarrow_client.py');
    assert.equal(script.code, 0, `pyarrow_client.py exited ${script.code ?? script.signal}:\n${script.stderr}`);
    const summary = JSON.parse(script.stdout.trim().split('\n').at(-1) ?? '') as Summary;
    t.diagnostic(`pyarrow ${summary.pyarrow}`);

    // What the script claims to have sent is what docs/api.md lists.
    assert.deepEqual(summary.big.schema, [
      ['fire_at', 'timestamp[us]'],
      ['target', 'dictionary<values=string, indices=int32, ordered=0>'],
      ['payload', 'binary'],
      ['headers', 'string'],
      ['key', 'string'],
      ['queue', 'dictionary<values=string, indices=int32, ordered=0>'],
    ]);
    assert.ok(summary.big.batches > 1, 'the 1,000 rows go as several record batches of one stream');

    const smallIds = arrowIds(summary.small.first, 3, false, 'small batch');
    assert.deepEqual(arrowIds(summary.small.again, 3, true, 'small batch again'), smallIds, 'duplicates answer the original ids, row-aligned');
    const bigIds = arrowIds(summary.big.first, 1_000, false, '1,000-row batch');
    assert.equal(summary.int64.first.status, 201, JSON.stringify(summary.int64.first));
    assert.match(summary.int64.first.content_type ?? '', /^application\/json/);
    const int64First = JSON.parse(summary.int64.first.body ?? '') as { accepted: number; duplicates: number; ids: string[]; duplicate_rows: unknown[] };
    assert.deepEqual([int64First.accepted, int64First.duplicates, int64First.ids.length, int64First.duplicate_rows], [2, 0, 2, []]);
    const intIds = arrowIds(summary.int64.again, 2, true, 'int64 batch again');

    const all = [...smallIds, ...bigIds, ...intIds];
    assert.equal(new Set(all).size, all.length, 'every new row got its own id');

    assertRefused(summary.bad_float_fire_at, 'fire_at');
    assertRefused(summary.bad_unknown_column, 'colour');

    // Every id GETs 200 with what pyarrow sent, fire_at as RFC 3339 with milliseconds.
    const expected: Array<[string, SentRow]> = [
      ...smallIds.map((id, i): [string, SentRow] => [id, summary.small.sent[i] as SentRow]),
      ...bigIds.map((id, i): [string, SentRow] => [id, summary.big.sent[i] as SentRow]),
      ...intIds.map((id, i): [string, SentRow] => [id, summary.int64.sent[i] as SentRow]),
    ];
    const lookups = expected.values();
    await withTimeout(
      Promise.all(
        Array.from({ length: 16 }, async () => {
          for (const [id, row] of lookups) {
            const { status, body } = await getJson(base, `/v1/timers/${id}`);
            assert.equal(status, 200, `GET ${id}: ${JSON.stringify(body)}`);
            const view = body as { id: string; state: string; fire_at: string; key: string | null; queue: string };
            assert.deepEqual(
              { id: view.id, state: view.state, fire_at: view.fire_at, key: view.key, queue: view.queue },
              { id, state: 'pending', fire_at: new Date(row.fire_at_ms).toISOString(), key: row.key, queue: row.queue },
              `timer ${id}`,
            );
          }
        }),
      ),
      60_000,
      `GET of ${expected.length} timers`,
    );

    // The 1,000-row batch (and nothing refused or duplicated) is pending.
    const stats = await getJson(base, '/v1/stats');
    assert.equal(stats.status, 200);
    assert.equal((stats.body as { pending: number }).pending, 3 + 1_000 + 2);
  } finally {
    if (service !== undefined) {
      if (service.child.exitCode === null && service.child.signalCode === null) service.child.kill('SIGKILL');
      await withTimeout(service.exited, 10_000, 'fermata to die');
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('pyarrow reads the Arrow record batches that "arrow" delivery POSTs to a sink', { timeout: installTimeoutMs + 2 * 60_000 }, async (t) => {
  const venv = await ensureVenv(['pyarrow'], { installTimeoutMs });
  if ('skip' in venv) return skipOrFail(t, `pyarrow reader not run: ${venv.skip}`);
  const dataDir = mkdtempSync(join(tmpdir(), 'fermata-pyarrow-sink-'));
  const sink = await startH2Sink();
  let service: Service | undefined;
  try {
    service = await startService(dataDir);
    const base = service.url;
    const put = await fetch(`${base}/v1/queues/pipe`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ delivery: 'arrow', sink: `${sink.url}/ingest`, batch_rows_max: 100, linger_ms: 20 }),
    });
    assert.equal(put.status, 200, await put.text());
    const count = 250;
    const lines = Array.from({ length: count }, (_, i) =>
      JSON.stringify({ delay_ms: 0, target: `https://t${i % 3}.example/`, payload_base64: Buffer.from([i & 0xff, 0, 0xfe]).toString('base64'), ...(i % 2 === 0 ? { key: `k${i}`, headers: { 'x-i': String(i) } } : {}), queue: 'pipe' }),
    );
    const added = await fetch(`${base}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: lines.join('\n') });
    assert.equal(added.status, 201, await added.text());
    await withTimeout(
      (async () => {
        for (;;) {
          const { body } = await getJson(base, '/v1/stats');
          if ((body as { delivered: number }).delivered === count) return;
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
      })(),
      30_000,
      'every timer to be delivered to the sink',
    );
    const files = sink.to('/ingest').map((request, i) => {
      const file = join(dataDir, `batch-${i}.arrows`);
      writeFileSync(file, request.body);
      return file;
    });
    assert.ok(files.length >= 3, `250 rows in batches of at most 100: ${files.length} batches`);
    const read = await run(venv.python, [readerScript, ...files], scriptTimeoutMs, 'pyarrow_read_batches.py');
    assert.equal(read.code, 0, read.stderr);
    const summary = JSON.parse(read.stdout.trim()) as { schemas: string[][][]; rows: Array<{ id: string; attempt: number; target: string; key: string | null; payload: string; headers: string | null }> };
    assert.deepEqual(summary.schemas, [
      [
        ['id', 'string'],
        ['fire_at', 'timestamp[ms, tz=UTC]'],
        ['attempt', 'uint32'],
        ['target', 'string'],
        ['key', 'string'],
        ['payload', 'binary'],
        ['headers', 'string'],
      ],
    ]);
    assert.equal(summary.rows.length, count);
    assert.equal(new Set(summary.rows.map((row) => row.id)).size, count, 'each timer once');
    const byKey = new Map(summary.rows.filter((row) => row.key !== null).map((row) => [row.key, row]));
    for (let i = 0; i < count; i += 2) {
      const row = byKey.get(`k${i}`);
      assert.ok(row !== undefined, `k${i} arrived`);
      assert.equal(row.payload, Buffer.from([i & 0xff, 0, 0xfe]).toString('hex'));
      assert.equal(row.target, `https://t${i % 3}.example/`);
      assert.deepEqual(JSON.parse(row.headers ?? 'null'), { 'x-i': String(i) });
      assert.equal(row.attempt, 1);
    }
    assert.equal(summary.rows.filter((row) => row.key === null && row.headers === null).length, count / 2, 'no key and no headers arrive as nulls');
  } finally {
    service?.child.kill('SIGTERM');
    if (service !== undefined) await withTimeout(service.exited, 30_000, 'the service to stop');
    await sink.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
