// A run file is a plain Arrow IPC file for a reader no one here wrote: pyarrow (in the cached
// venv of test/helpers/python-venv.ts, shared with test/integration/pyarrow.test.ts) opens it
// with pa.ipc.open_file (footer, batches, schema, metadata, values) and, past the leading
// magic, with pa.ipc.open_stream (the schema message the Arrow spec puts there). No python3
// or no reachable package index: skipped, saying which. Every wait is bounded.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { nodeFileSystem } from '../../engine/fs/node-file-system.ts';
import { timerState } from '../../engine/store/resident-store.ts';
import { runFileName } from '../../engine/spill/format.ts';
import { writeRun } from '../../engine/spill/run-file.ts';
import { RunRowsBuilder } from '../../engine/spill/run-rows.ts';
import { packCallbacks } from '../../engine/store/callback-bytes.ts';
import { ensureVenv, run } from '../helpers/python-venv.ts';
import { testScratch } from '../helpers/scratch.ts';
import { skipOrFail } from '../helpers/tools.ts';

const installTimeoutMs = 10 * 60_000;
const scratch = testScratch('fermata-spill-pyarrow');

const script = `
import json, sys, pyarrow as pa
path = sys.argv[1]
f = pa.ipc.open_file(path)
table = f.read_all()
with open(path, 'rb') as raw:
    stream = pa.ipc.open_stream(raw.read()[8:]).read_all()
print(json.dumps({
  'batches': [f.get_batch(i).num_rows for i in range(f.num_record_batches)],
  'schema': [[field.name, str(field.type), field.nullable] for field in f.schema],
  'metadata': {k.decode(): v.decode() for k, v in (f.schema.metadata or {}).items()},
  'seq': table.column('seq').to_pylist(),
  'due_at_ms': table.column('due_at').cast(pa.int64()).to_pylist(),
  'key': [None if v is None else v.decode() for v in table.column('key').to_pylist()],
  'target': table.column('target').to_pylist(),
  'last_error': table.column('last_error').to_pylist(),
  'last_attempt_at_ms': table.column('last_attempt_at').cast(pa.int64()).to_pylist(),
  'callback': table.column('callback').to_pylist(),
  'failure_callback': table.column('failure_callback').to_pylist(),
  'created_at_ms': table.column('created_at').cast(pa.int64()).to_pylist(),
  'stream_rows': stream.num_rows,
}))
`;

test('pyarrow reads a run as an Arrow file (and as a stream past the magic): batches, schema, metadata, values', { timeout: installTimeoutMs + 60_000 }, async (t) => {
  const venv = await ensureVenv(['pyarrow'], { installTimeoutMs });
  if ('skip' in venv) return skipOrFail(t, `pyarrow not available: ${venv.skip}`);
  const dir = scratch.tempDir('run');
  const builder = new RunRowsBuilder();
  const encoder = new TextEncoder();
  const baseMs = 1_800_000_000_000;
  for (let i = 0; i < 50; i++) {
    const dueAtMs = baseMs + Math.floor(i / 10) * 3_600_000 + i;
    builder.append(
      { seq: 100 + i, row: i % 4, fireAtMs: dueAtMs, dueAtMs, state: timerState.pending, attempts: 0, lastStatus: 0, deadReason: 0, ...(i % 2 === 0 ? { createdAtMs: baseMs - 1000 - i } : {}) },
      'default',
      `https://ziel.example/ü/${i % 3}`,
      i % 3 === 0 ? new Uint8Array(0) : encoder.encode(`ключ-${i}`),
      encoder.encode(`payload ${i}`),
      new Uint8Array(0),
      i % 5 === 2 ? packCallbacks(encoder.encode(`https://cb.example/${i}`), i % 2 === 0 ? encoder.encode(`https://cb.example/dead/${i}`) : new Uint8Array(0)) : new Uint8Array(0),
    );
    if (i % 7 === 3) builder.setFailure(i, `HTTP 503 from ziel ${i}`, baseMs - i);
  }
  const rows = builder.finish();
  const meta = await writeRun(nodeFileSystem, dir, 3, 77, rows);
  const result = await run(venv.python, ['-c', script, join(dir, runFileName(3))], 60_000, 'pyarrow reading a run');
  assert.equal(result.code, 0, result.stderr);
  const read = JSON.parse(result.stdout) as {
    batches: number[];
    schema: Array<[string, string, boolean]>;
    metadata: Record<string, string>;
    seq: number[];
    due_at_ms: number[];
    key: Array<string | null>;
    target: string[];
    last_error: Array<string | null>;
    last_attempt_at_ms: Array<number | null>;
    callback: Array<string | null>;
    failure_callback: Array<string | null>;
    created_at_ms: Array<number | null>;
    stream_rows: number;
  };
  assert.deepEqual(read.batches, meta.buckets.map((bucket) => bucket.rows));
  assert.deepEqual(read.batches, [10, 10, 10, 10, 10], 'one batch per hour bucket');
  assert.deepEqual(read.schema, [
    ['seq', 'double', false],
    ['row', 'uint32', false],
    ['fire_at', 'timestamp[ms, tz=UTC]', false],
    ['due_at', 'timestamp[ms, tz=UTC]', false],
    ['state', 'uint8', false],
    ['attempts', 'uint16', false],
    ['last_status', 'uint16', false],
    ['queue', 'string', false],
    ['target', 'string', false],
    ['key', 'binary', true],
    ['payload', 'binary', false],
    ['headers', 'binary', true],
    ['dead_reason', 'uint8', false],
    ['last_error', 'string', true],
    ['last_attempt_at', 'timestamp[ms, tz=UTC]', true],
    ['callback', 'string', true],
    ['failure_callback', 'string', true],
    ['created_at', 'timestamp[ms, tz=UTC]', true],
  ]);
  assert.deepEqual(read.metadata, { 'fermata.spill.version': '4', 'fermata.stamp': '77', 'fermata.run': '3', 'fermata.bucket_width_ms': '3600000' });
  assert.deepEqual(read.seq, Array.from(rows.seq));
  assert.deepEqual(read.due_at_ms, Array.from(rows.dueAtMs));
  assert.deepEqual(read.key, Array.from({ length: 50 }, (_, i) => (i % 3 === 0 ? null : `ключ-${i}`)));
  assert.deepEqual(read.target, Array.from({ length: 50 }, (_, i) => `https://ziel.example/ü/${i % 3}`));
  assert.deepEqual(read.last_error, Array.from({ length: 50 }, (_, i) => (i % 7 === 3 ? `HTTP 503 from ziel ${i}` : null)));
  assert.deepEqual(read.last_attempt_at_ms, Array.from({ length: 50 }, (_, i) => (i % 7 === 3 ? baseMs - i : null)));
  assert.deepEqual(read.callback, Array.from({ length: 50 }, (_, i) => (i % 5 === 2 ? `https://cb.example/${i}` : null)));
  assert.deepEqual(read.created_at_ms, Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? baseMs - 1000 - i : null)));
  assert.deepEqual(read.failure_callback, Array.from({ length: 50 }, (_, i) => (i % 5 === 2 && i % 2 === 0 ? `https://cb.example/dead/${i}` : null)));
  assert.equal(read.stream_rows, 50);
});
