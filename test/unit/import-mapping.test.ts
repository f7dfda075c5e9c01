// fermata import's column mapping, checkpoint and pipeline, without a service: values are
// checked and typed with errors that name the file, row, column and value; --set gives every
// row one value; the checkpoint counts only rows acknowledged without a gap and refuses another
// file or mapping; the pipeline keeps at most `concurrency` batches in flight and says a
// refusal of the service as the file's row.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Checkpoint, readCheckpoint, resumeRow } from '../../cli/import/checkpoint.ts';
import { ImportError } from '../../cli/import/import-error.ts';
import { type BatchAnswer, runImport, type TimerBatchSender } from '../../cli/import/import-run.ts';
import { mapBatch, mappingText, parseMapping, sliceTimerRows, type TimerRows } from '../../cli/import/mapping.ts';
import { timerArrowStream } from '../../cli/import/timer-arrow.ts';
import { batchFromArrow } from '../../engine/batch/arrow-codec.ts';
import { bytesAt } from '../../engine/batch/timer-batch.ts';
import type { ProgressView } from '../../cli/import/progress.ts';
import type { Source, SourceBatch, SourceColumn } from '../../cli/import/source.ts';
import { testScratch } from '../helpers/scratch.ts';

const scratch = testScratch('import-mapping');
const hash = 'ffffffffffffffffffffffffffffffff';

function batchOf(firstRow: number, columns: Record<string, SourceColumn>): SourceBatch {
  const rows = Object.values(columns)[0]?.length ?? 0;
  return { firstRow, rows, columns: new Map(Object.entries(columns)), endByte: 0 };
}

test('same-named columns fill their fields without flags; --map and --set win over them', () => {
  const plain = parseMapping('f.csv', [], [], ['fire_at', 'target', 'key', 'extra']);
  assert.equal(mappingText(plain), 'fire_at=column:fire_at,target=column:target,key=column:key');
  const mapped = parseMapping('f.csv', ['fire_at=due', 'target=url,queue=q'], ['payload=hi'], ['due', 'url', 'q', 'target']);
  assert.equal(mappingText(mapped), 'fire_at=column:due,target=column:url,payload=set:hi,queue=column:q');
  // --set delay_ms keeps a same-named fire_at column out.
  assert.equal(mappingText(parseMapping('f.csv', [], ['delay_ms=0'], ['fire_at', 'target'])), 'delay_ms=set:0,target=column:target');
});

test('mapping mistakes are refused before a row is read, naming the fix', () => {
  assert.throws(() => parseMapping('f.csv', ['when=due'], [], ['due']), /"when" is not a timer field; the fields are fire_at, delay_ms/);
  assert.throws(() => parseMapping('f.csv', ['fire_at'], [], ['due']), /--map takes FIELD=COLUMN, not "fire_at"/);
  assert.throws(() => parseMapping('f.csv', ['fire_at=due'], ['fire_at=2026-01-01T00:00:00Z'], ['due']), /fire_at is given twice/);
  assert.throws(() => parseMapping('f.csv', [], [], ['fire_at', 'url']), /f.csv: no target; name its column with --map target=COLUMN/);
  assert.throws(() => parseMapping('f.csv', [], [], ['target']), /f.csv: no fire time/);
  assert.throws(() => parseMapping('f.csv', [], [], ['fire_at', 'delay_ms', 'target']), /gives both fire_at and delay_ms/);
});

test('values are typed as the API takes them: times in ms, RFC 3339 text, --set for every row, headers as JSON text', () => {
  const mapping = parseMapping('f.ndjson', [], ['queue=billing'], undefined);
  const rows = mapBatch(
    mapping,
    batchOf(10, {
      fire_at: ['2030-03-17T17:46:40Z', 1_900_000_000_001, 1_900_000_000_002n],
      target: ['https://a.example/', 'https://a.example/', 'https://b.example/'],
      payload: [{ n: 1 }, null, 'text'],
      headers: [{ 'x-a': '1' }, '{"x-b":"2"}', null],
      key: ['k0', null, 'k2'],
    }),
    'f.ndjson',
    hash,
  );
  assert.deepEqual([...(rows.fireAtMs ?? [])], [1_900_000_000_000, 1_900_000_000_001, 1_900_000_000_002]);
  assert.equal(rows.delayMs, undefined);
  assert.deepEqual(rows.payload, ['{"n":1}', '', 'text']);
  assert.deepEqual(rows.headers, [{ 'x-a': '1' }, { 'x-b': '2' }, null]);
  assert.deepEqual(rows.key, ['k0', `import:${hash}:11`, 'k2']);
  assert.deepEqual(rows.queue, ['billing', 'billing', 'billing']);
});

test('a bad value names the file, the row, the column and the value', () => {
  const mapping = parseMapping('t.csv', ['fire_at=due,target=url'], [], ['due', 'url', 'headers']);
  const bad = (columns: Record<string, SourceColumn>): ImportError => {
    try {
      mapBatch(mapping, batchOf(40, columns), 't.csv', hash);
    } catch (err) {
      assert.ok(err instanceof ImportError);
      return err;
    }
    assert.fail('mapBatch took a bad value');
  };
  const url = ['https://a.example/', 'https://a.example/'];
  assert.match(bad({ due: ['2030-01-01T00:00:00Z', '1796083200'], url, headers: [null, null] }).message, /^t\.csv row 41, column "due", value "1796083200": fire_at 1796083200 looks like epoch seconds: give epoch milliseconds \(1796083200 s is 1796083200000 ms\)/);
  assert.match(bad({ due: ['tomorrow', '2030-01-01T00:00:00Z'], url, headers: [null, null] }).message, /^t\.csv row 40, column "due", value "tomorrow": fire_at must be an RFC 3339 date-time/);
  assert.match(bad({ due: ['2030-01-01T00:00:00Z', null], url, headers: [null, null] }).message, /^t\.csv row 41, column "due": has no fire time/);
  assert.match(bad({ due: ['2030-01-01T00:00:00Z', '2030-01-01T00:00:00Z'], url: ['https://a.example/', null], headers: [null, null] }).message, /^t\.csv row 41, column "url": has no target/);
  assert.match(bad({ due: ['2030-01-01T00:00:00Z', '2030-01-01T00:00:00Z'], url, headers: ['[1]', null] }).message, /^t\.csv row 40, column "headers", value "\[1\]": headers must be a JSON object/);
});

test('the checkpoint counts only rows answered without a gap, and a resume refuses another file or mapping', async () => {
  const path = join(scratch.tempDir('checkpoint'), 'c.json');
  const checkpoint = new Checkpoint(path, { file: 'f.csv', sizeBytes: 10, hash, mapping: 'm' }, 100);
  checkpoint.acknowledge(200, 100);
  assert.equal(checkpoint.acknowledged, 100);
  checkpoint.acknowledge(100, 100);
  assert.equal(checkpoint.acknowledged, 300);
  await checkpoint.save();
  const state = await readCheckpoint(path);
  assert.equal(state?.acknowledged, 300);
  assert.equal(resumeRow(path, state!, hash, 'm'), 300);
  assert.throws(() => resumeRow(path, state!, '0'.repeat(32), 'm'), /the checkpoint is of another file/);
  assert.throws(() => resumeRow(path, state!, hash, 'other'), /made with another mapping \(m\)/);
  assert.equal(await readCheckpoint(join(path, '..', 'absent.json')), undefined);
  assert.match(readFileSync(path, 'utf8'), /"acknowledged": 300/);
});

function memorySource(rows: number, batchRows: number): Source {
  return {
    format: 'ndjson',
    sizeBytes: rows,
    totalRows: rows,
    columnNames: undefined,
    async *batches(skipRows: number) {
      for (let first = skipRows; first < rows; first += batchRows) {
        const n = Math.min(batchRows, rows - first);
        yield batchOf(first, { delay_ms: new Array(n).fill(0), target: new Array(n).fill('https://a.example/') });
      }
    },
    close: async () => undefined,
  };
}

const quiet: ProgressView = { update: () => undefined, stop: () => undefined };

test('the pipeline keeps at most `concurrency` batches in flight and every row is sent once', async () => {
  let inFlight = 0;
  let most = 0;
  const sent: number[] = [];
  const sender: TimerBatchSender = {
    async send(rows): Promise<BatchAnswer> {
      most = Math.max(most, ++inFlight);
      await new Promise((resolve) => setTimeout(resolve, rows.firstRow % 3));
      inFlight--;
      sent.push(rows.firstRow);
      return { duplicates: 1 };
    },
  };
  const path = join(scratch.tempDir('pipeline'), 'c.json');
  const checkpoint = new Checkpoint(path, { file: 'm', sizeBytes: 1000, hash, mapping: '' }, 0);
  const summary = await runImport({ file: 'm', source: memorySource(1000, 10), mapping: parseMapping('m', [], [], undefined), fileHash: hash, sender, concurrency: 4, batchRows: 10, checkpoint, progress: quiet, checkpointEveryMs: 0 });
  assert.equal(most, 4);
  assert.deepEqual([...sent].sort((a, b) => a - b), Array.from({ length: 100 }, (_, i) => i * 10));
  assert.equal(summary.rows, 1000);
  assert.equal(summary.duplicates, 100);
  assert.equal((await readCheckpoint(path))?.acknowledged, 1000);
});

test("a refusal of the service is said of the file's row, column and value, and the checkpoint stops before it", async () => {
  const sender: TimerBatchSender = {
    async send(rows: TimerRows): Promise<BatchAnswer> {
      if (rows.firstRow === 30) throw Object.assign(new Error('target must be an absolute http or https URL'), { code: 'BATCH_INVALID', row: 4, field: 'target' });
      return { duplicates: 0 };
    },
  };
  const path = join(scratch.tempDir('refusal'), 'c.json');
  const checkpoint = new Checkpoint(path, { file: 'm', sizeBytes: 1000, hash, mapping: '' }, 0);
  await assert.rejects(
    runImport({ file: 'm.ndjson', source: memorySource(100, 10), mapping: parseMapping('m', [], [], undefined), fileHash: hash, sender, concurrency: 1, batchRows: 10, checkpoint, progress: quiet, checkpointEveryMs: 0 }),
    /^ImportError: m\.ndjson row 34, column "target", value "https:\/\/a\.example\/": fermata refused it: target must be/,
  );
  assert.equal((await readCheckpoint(path))?.acknowledged, 30);
});

test('the Arrow stream carries delay_ms, bytes, headers, queues with nulls and callbacks as the engine reads them; a slice keeps its rows', () => {
  const mapping = parseMapping('f.ndjson', [], [], undefined);
  const rows = mapBatch(
    mapping,
    batchOf(5, {
      delay_ms: [0, '1500', 3n],
      target: ['https://a.example/', 'https://b.example/', 'https://a.example/'],
      payload_base64: ['AAEC', null, '/w=='],
      headers: [null, { 'x-a': '1' }, null],
      queue: ['q1', null, 'q1'],
      callback: [null, 'https://cb.example/', null],
    }),
    'f.ndjson',
    hash,
  );
  const decoded = batchFromArrow(timerArrowStream(rows), 1_000_000_000_000, 100_000, 'client');
  assert.deepEqual([...decoded.fireAtMs], [1_000_000_000_000, 1_000_000_001_500, 1_000_000_000_003]);
  assert.deepEqual([0, 1, 2].map((i) => [...bytesAt(decoded.payload, i)]), [[0, 1, 2], [], [255]]);
  assert.deepEqual([0, 1, 2].map((i) => Buffer.from(bytesAt(decoded.headers, i)).toString()), ['', '{"x-a":"1"}', '']);
  assert.deepEqual([0, 1, 2].map((i) => decoded.queues[decoded.queueIndex[i] as number]), ['q1', 'default', 'q1']);
  assert.deepEqual([0, 1, 2].map((i) => Buffer.from(bytesAt(decoded.callback!, i)).toString()), ['', 'https://cb.example/', '']);
  const tail = sliceTimerRows(rows, 1, 3);
  assert.equal(tail.firstRow, 6);
  assert.deepEqual([...(tail.delayMs ?? [])], [1500, 3]);
  assert.deepEqual(tail.key, [`import:${hash}:6`, `import:${hash}:7`]);
});
