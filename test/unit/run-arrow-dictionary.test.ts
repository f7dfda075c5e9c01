// A run batch's queue and target columns decode into the same strings whatever their order:
// decodeRunBatch matches a row against the row before and the first few distinct values by
// bytes before it decodes one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Table, tableToIPC } from 'apache-arrow';
import { spillFormatVersion } from '../../engine/spill/format.ts';
import { decodeRunBatch, encodeRunBatch, runSchema } from '../../engine/spill/run-arrow.ts';
import { RunRowsBuilder } from '../../engine/spill/run-rows.ts';
import { Prng } from '../helpers/prng.ts';

test('queues and targets decode row by row as written: repeats, alternations, prefixes of one another, non-ASCII, more distinct values than are matched by bytes', () => {
  // Twelve queues (more than the eight matched by bytes), some a prefix of another or of equal length.
  const queues = ['default', 'defaul', 'default2', 'tenth', 'tenti', 'é', 'e', 'ée', 'q', 'qq', 'q1', 'longer-queue-name-of-many-bytes'];
  const targets = ['https://a.example/hook', 'https://a.example/hooks', 'https://b.example/hook'];
  const prng = new Prng(41);
  const written: Array<[string, string]> = [];
  const builder = new RunRowsBuilder(16);
  for (let i = 0; i < 2000; i++) {
    // Runs of one value, then a value drawn anew: both paths of the decode.
    const queue = i % 7 < 3 && i > 0 ? (written[i - 1] as [string, string])[0] : (queues[prng.below(queues.length)] as string);
    const target = targets[prng.below(targets.length)] as string;
    written.push([queue, target]);
    builder.append({ seq: 1, row: i, fireAtMs: 1000 + i, dueAtMs: 1000 + i, state: 1, attempts: 0, lastStatus: 0, deadReason: 0 }, queue, target, new Uint8Array(0), Uint8Array.of(i & 0xff), new Uint8Array(0));
  }
  const rows = builder.finish();
  const schema = runSchema({ runId: 1, stamp: 1, bucketWidthMs: 3_600_000 });
  const stream = tableToIPC(new Table([encodeRunBatch(schema, rows, 0, rows.rows, new WeakMap())]), 'stream');
  const decoded = decodeRunBatch(stream, rows.rows, spillFormatVersion);
  for (let i = 0; i < rows.rows; i++) {
    assert.deepEqual([decoded.queues[decoded.queueIndex[i] as number], decoded.targets[decoded.targetIndex[i] as number]], written[i], `row ${i}`);
  }
  assert.equal(new Set(decoded.queues).size, decoded.queues.length, 'each queue is one entry');
  assert.equal(new Set(decoded.targets).size, decoded.targets.length, 'each target is one entry');
});
