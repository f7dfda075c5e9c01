// Idempotency keys as a client meets them over HTTP (the real `fermata serve`, port 0): a
// duplicate's answer carries the original's state and the fields that differ from it, for one
// JSON timer, each row of an NDJSON or Arrow batch (JSON and Arrow answers) and each line of
// /v1/timers/stream, and of a Flight DoPut asking for ids; a batch's JSON answer lists every id
// in input order. Every wait is bounded; the child is killed in `after`.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Binary, type Data, type DataType, Field, Int32, makeData, RecordBatch, Schema, Struct, Table, tableFromIPC, tableToIPC, Utf8 } from 'apache-arrow';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { FlightTestClient, flightDataOf, timersDescriptor } from '../../ingest/flight/flight-client.ts';
import { batchToArrow } from '../helpers/arrow.ts';
import { ensureVenv, run } from '../helpers/python-venv.ts';
import { flightUrl, type Service, startService } from '../helpers/service.ts';
import { skipOrFail } from '../helpers/tools.ts';

const arrowType = 'application/vnd.apache.arrow.stream';
const ndjsonType = 'application/x-ndjson';
const target = 'https://a.example/hook';
const inAnHour = (): number => Date.now() + 3_600_000;

const children = new Set<ChildProcess>();
const dataDir = mkdtempSync(join(tmpdir(), 'fermata-duplicates-'));
let service: Service;

before(async () => {
  service = await startService(dataDir, (child) => children.add(child), { args: ['--flight', '127.0.0.1:0'] });
});

after(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

interface Answer {
  readonly status: number;
  readonly type: string;
  readonly body: Buffer;
}

async function post(path: string, contentType: string, body: string | Uint8Array, accept?: string): Promise<Answer> {
  const response = await fetch(`${service.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': contentType, ...(accept === undefined ? {} : { accept }) },
    body,
    signal: AbortSignal.timeout(10_000),
  });
  return { status: response.status, type: response.headers.get('content-type') ?? '', body: Buffer.from(await response.arrayBuffer()) };
}

const json = (answer: Answer): Record<string, unknown> => JSON.parse(answer.body.toString('utf8')) as Record<string, unknown>;

async function addOne(timer: Record<string, unknown>): Promise<{ status: number; body: Record<string, unknown> }> {
  const answer = await post('/v1/timers', 'application/json', JSON.stringify(timer));
  return { status: answer.status, body: json(answer) };
}

/** An Arrow stream giving delay_ms (not fire_at): target, key and payload, one row each. */
function delayArrow(rows: ReadonlyArray<{ delayMs: number; key: string; payload: string }>): Uint8Array {
  const encoder = new TextEncoder();
  const strings = (values: readonly string[], type: Utf8 | Binary): Data<DataType> => {
    const parts = values.map((value) => encoder.encode(value));
    const offsets = new Int32Array(parts.length + 1);
    for (let i = 0; i < parts.length; i++) offsets[i + 1] = (offsets[i] as number) + (parts[i] as Uint8Array).length;
    const data = new Uint8Array(offsets[parts.length] as number);
    for (let i = 0; i < parts.length; i++) data.set(parts[i] as Uint8Array, offsets[i] as number);
    const props = { length: parts.length, valueOffsets: offsets, data };
    return (type instanceof Utf8 ? makeData({ type, ...props }) : makeData({ type, ...props })) as Data<DataType>;
  };
  const columns: Array<[string, Data<DataType>]> = [
    ['delay_ms', makeData({ type: new Int32(), length: rows.length, data: Int32Array.from(rows, (row) => row.delayMs) }) as Data<DataType>],
    ['target', strings(rows.map(() => target), new Utf8())],
    ['key', strings(rows.map((row) => row.key), new Utf8())],
    ['payload', strings(rows.map((row) => row.payload), new Binary())],
  ];
  const schema = new Schema(columns.map(([name, data]) => new Field(name, data.type, false)));
  const struct = makeData({ type: new Struct(schema.fields), length: rows.length, children: columns.map(([, data]) => data) });
  return tableToIPC(new Table([new RecordBatch(schema, struct)]), 'stream');
}

/** An Arrow answer's columns, row by row. */
function arrowRows(answer: Answer): Array<{ id: string; duplicate: boolean; state: string | null; differs: string[] | null }> {
  assert.equal(answer.status, 201, answer.body.toString('utf8'));
  assert.equal(answer.type, arrowType);
  const table = tableFromIPC(answer.body);
  assert.deepEqual(
    table.schema.fields.map((field) => `${field.name}:${String(field.type)}`),
    ['id:Utf8', 'duplicate:Bool', 'state:Utf8', 'differs:List<Utf8>', 'revision:Uint32'],
  );
  return table.toArray().map((row: { id: string; duplicate: boolean; state: string | null; differs: { toArray(): string[] } | null }) => ({
    id: row.id,
    duplicate: row.duplicate,
    state: row.state,
    differs: row.differs === null ? null : [...row.differs.toArray()],
  }));
}

describe('one JSON timer', () => {
  test('an exact retry: 200 with state and an empty differs; a collision names the fields', async () => {
    const fireAt = new Date(inAnHour()).toISOString();
    const timer = { fire_at: fireAt, target, payload: 'hello', headers: { 'x-trace': 't1' }, key: 'one-1', queue: 'billing' };
    const first = await addOne(timer);
    assert.equal(first.status, 201);
    assert.deepEqual(Object.keys(first.body).sort(), ['duplicate', 'fire_at', 'id', 'revision'], 'a new timer\'s answer is as before');

    const retry = await addOne(timer);
    assert.equal(retry.status, 200);
    assert.deepEqual(retry.body, { id: first.body.id, fire_at: fireAt, revision: 1, duplicate: true, state: 'pending', differs: [] });

    // The same bytes as payload_base64 are the same payload.
    const asBase64 = await addOne({ ...timer, payload: undefined, payload_base64: Buffer.from('hello').toString('base64') });
    assert.deepEqual(asBase64.body.differs, []);

    const collision = await addOne({ fire_at: new Date(inAnHour() + 60_000).toISOString(), target: 'https://b.example/', payload: 'bye', key: 'one-1' });
    assert.equal(collision.status, 200);
    assert.equal(collision.body.id, first.body.id, 'first add wins');
    assert.deepEqual(collision.body.differs, ['target', 'payload', 'headers', 'queue', 'fire_at']);
  });

  test('a retry after the timer was cancelled says "cancelled"; delay_ms is not compared as a fire_at', async () => {
    const timer = { delay_ms: 600_000, target, key: 'one-2' };
    const first = await addOne(timer);
    const cancel = await fetch(`${service.url}/v1/timers/${String(first.body.id)}`, { method: 'DELETE', signal: AbortSignal.timeout(10_000) });
    assert.equal(cancel.status, 200);
    // A retry a moment later computes another fire time from its delay: still an exact retry.
    const retry = await addOne(timer);
    assert.equal(retry.status, 200);
    assert.deepEqual([retry.body.id, retry.body.state, retry.body.differs], [first.body.id, 'cancelled', []]);
  });
});

describe('batches', () => {
  test('NDJSON answered as JSON: ids in input order and the duplicate rows with state and differs', async () => {
    const base = inAnHour();
    const known = await addOne({ fire_at: base, target, payload: 'a', key: 'nd-1' });
    const lines = [
      { fire_at: base + 1, target, payload: 'new', key: 'nd-2' },
      { fire_at: base, target, payload: 'a', key: 'nd-1' },
      { fire_at: base + 2, target, payload: 'b', key: 'nd-1', queue: 'other' },
      { fire_at: base + 1, target, payload: 'changed', key: 'nd-2' },
      { delay_ms: 1_000, target, payload: 'a', key: 'nd-1' },
    ];
    const answer = await post('/v1/timers', ndjsonType, lines.map((line) => JSON.stringify(line)).join('\n') + '\n');
    assert.equal(answer.status, 201, answer.body.toString('utf8'));
    const body = json(answer) as { accepted: number; duplicates: number; ids: string[]; duplicate_rows: unknown[] };
    assert.equal(body.accepted, 5);
    assert.equal(body.duplicates, 4);
    assert.equal(body.ids.length, 5);
    assert.deepEqual([body.ids[1], body.ids[2], body.ids[4]], [known.body.id, known.body.id, known.body.id], 'a duplicate row names the original');
    assert.equal(body.ids[3], body.ids[0], 'a key repeated within the batch names its first row');
    assert.deepEqual(body.duplicate_rows, [
      { row: 1, state: 'pending', differs: [] },
      { row: 2, state: 'pending', differs: ['payload', 'queue', 'fire_at'] },
      { row: 3, state: 'pending', differs: ['payload'] },
      { row: 4, state: 'pending', differs: [] },
    ]);
    const fresh = json(await post('/v1/timers', ndjsonType, JSON.stringify({ delay_ms: 5_000, target }))) as { ids: string[]; duplicate_rows: unknown[] };
    assert.equal(fresh.ids.length, 1);
    assert.deepEqual(fresh.duplicate_rows, []);
  });

  test('Arrow answered as Arrow: state and differs columns beside id and duplicate, null for new rows', async () => {
    const base = inAnHour();
    const spec = (over: Partial<TimerSpec>): TimerSpec => ({ fireAtMs: base, target, payload: 'x', key: 'arrow-1', ...over });
    const first = arrowRows(await post('/v1/timers', arrowType, batchToArrow(batchFromSpecs([spec({}), spec({ key: 'arrow-2' })])), arrowType));
    assert.deepEqual(first.map((row) => [row.duplicate, row.state, row.differs]), [[false, null, null], [false, null, null]]);
    const again = arrowRows(await post('/v1/timers', arrowType, batchToArrow(batchFromSpecs([spec({ key: 'arrow-3' }), spec({}), spec({ key: 'arrow-2', fireAtMs: base + 5, headers: { 'x-a': '1' } })])), arrowType));
    assert.deepEqual(again.map((row) => [row.duplicate, row.state, row.differs]), [
      [false, null, null],
      [true, 'pending', []],
      [true, 'pending', ['headers', 'fire_at']],
    ]);
    assert.deepEqual([again[1]?.id, again[2]?.id], [first[0]?.id, first[1]?.id]);
    // The same Arrow batch answered as JSON lists the same.
    const asJson = json(await post('/v1/timers', arrowType, batchToArrow(batchFromSpecs([spec({ payload: 'y' })]))));
    assert.deepEqual(asJson.duplicate_rows, [{ row: 0, state: 'pending', differs: ['payload'] }]);
    assert.deepEqual(asJson.ids, [first[0]?.id]);
  });

  test('an Arrow stream giving delay_ms: fire_at is not among the differences', async () => {
    const first = arrowRows(await post('/v1/timers', arrowType, delayArrow([{ delayMs: 600_000, key: 'delay-1', payload: 'p' }]), arrowType));
    const again = arrowRows(await post('/v1/timers', arrowType, delayArrow([{ delayMs: 600_000, key: 'delay-1', payload: 'p' }, { delayMs: 700_000, key: 'delay-1', payload: 'q' }]), arrowType));
    assert.deepEqual(again.map((row) => [row.id, row.state, row.differs]), [
      [first[0]?.id, 'pending', []],
      [first[0]?.id, 'pending', ['payload']],
    ]);
  });
});

describe('POST /v1/timers/stream', () => {
  test('a duplicate line carries state and differs', async () => {
    const fireAt = inAnHour();
    const lines = [
      { fire_at: fireAt, target, payload: 's', key: 'stream-1' },
      { fire_at: fireAt, target, payload: 's', key: 'stream-1' },
      { fire_at: fireAt, target: 'https://c.example/', payload: 's', key: 'stream-1' },
    ];
    const answer = await post('/v1/timers/stream', ndjsonType, lines.map((line) => JSON.stringify(line)).join('\n') + '\n');
    assert.equal(answer.status, 200);
    const out = answer.body.toString('utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.equal(out.length, 3);
    assert.deepEqual(Object.keys(out[0] ?? {}).sort(), ['duplicate', 'fire_at', 'id', 'line', 'revision', 'status']);
    assert.deepEqual([out[1]?.status, out[1]?.id, out[1]?.state, out[1]?.differs], [200, out[0]?.id, 'pending', []]);
    assert.deepEqual([out[2]?.status, out[2]?.differs], [200, ['target']]);
  });
});

describe('Flight DoPut with fermata-ids: arrow', () => {
  test('each PutResult\'s Arrow answer has the state and differs columns', async () => {
    const client = new FlightTestClient(await flightUrl(service), { ids: true });
    try {
      const spec: TimerSpec = { fireAtMs: inAnHour(), target, payload: 'f', key: 'flight-1' };
      const put = async (specs: readonly TimerSpec[]): Promise<Array<[boolean, string | null, string[] | null]>> => {
        const outcome = await client.doPut(flightDataOf(timersDescriptor(), [batchToArrow(batchFromSpecs(specs))]));
        assert.equal(outcome.error, undefined, outcome.error?.details);
        const table = tableFromIPC(outcome.results[0] as Buffer);
        return table.toArray().map((row: { duplicate: boolean; state: string | null; differs: { toArray(): string[] } | null }) => [row.duplicate, row.state, row.differs === null ? null : [...row.differs.toArray()]]);
      };
      assert.deepEqual(await put([spec]), [[false, null, null]]);
      assert.deepEqual(await put([spec, { ...spec, target: 'https://d.example/' }]), [
        [true, 'pending', []],
        [true, 'pending', ['target']],
      ]);
    } finally {
      client.close();
    }
  });
});

// Regression: with one array backing the duplicate column and both null bitmaps, apache-arrow
// announced a 256-row answer's body 24 bytes longer than it wrote, and pyarrow refused it.
test('pyarrow reads Arrow answers of any row count, with and without duplicates', { timeout: 15 * 60_000 }, async (t) => {
  const venv = await ensureVenv(['pyarrow'], { installTimeoutMs: 10 * 60_000 });
  if ('skip' in venv) return skipOrFail(t, `pyarrow not run: ${venv.skip}`);
  const files: string[] = [];
  for (const rows of [1, 8, 256, 1000]) {
    const specs = Array.from({ length: rows }, (_, i): TimerSpec => ({ fireAtMs: inAnHour(), target, payload: `r${i}`, key: `py-${rows}-${i % 3 === 0 ? 0 : i}` }));
    for (const pass of [0, 1]) {
      const answer = await post('/v1/timers', arrowType, batchToArrow(batchFromSpecs(specs)), arrowType);
      assert.equal(answer.status, 201, answer.body.toString('utf8'));
      const file = join(dataDir, `answer-${rows}-${pass}.arrow`);
      writeFileSync(file, answer.body);
      files.push(file);
    }
  }
  const script = 'import sys, pyarrow.ipc as ipc\nfor name in sys.argv[1:]:\n    ipc.open_stream(open(name, "rb").read()).read_all().validate(full=True)\nprint("ok")';
  const read = await run(venv.python, ['-c', script, ...files], 60_000, 'pyarrow reading the answers');
  assert.equal(read.code, 0, read.stderr);
});
