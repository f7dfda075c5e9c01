// What a cluster node's Flight service makes of its front's answers: a batch's 201 JSON answer
// becomes the same PutResult app_metadata, in both forms, as one engine's admission gives
// (put-result.ts), and an error answer the Flight status one node gives for its code, a
// partial batch's accepted rows named (status-map.ts relayedFailure).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { status } from '@grpc/grpc-js';
import { tableFromIPC } from 'apache-arrow';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine } from '../../engine/engine.ts';
import { duplicateRowsJson } from '../../ingest/duplicate-answers.ts';
import { type BatchAnswerJson, putResultMetadata, putResultOfAnswer } from '../../ingest/flight/put-result.ts';
import { relayedFailure } from '../../ingest/flight/status-map.ts';
import { RelayedRefusal } from '../../ingest/http/error-map.ts';
import { batchToArrow } from '../helpers/arrow.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

test('a batch\'s JSON answer makes the PutResult one engine\'s admission makes: the Arrow ids and the counts', async () => {
  const engine = await Engine.open({ dataDir: '/answers', fs: new SimFileSystem({ seed: 7 }) });
  try {
    const fireAtMs = Date.now() + 3_600_000;
    await engine.admit(batchFromSpecs(['a', 'b'].map((key) => ({ fireAtMs, target: 'https://example.com/first', key }))));
    const ipc = batchToArrow(batchFromSpecs(['a', 'new', 'b'].map((key) => ({ fireAtMs, target: key === 'a' ? 'https://example.com/other' : 'https://example.com/first', key }))));
    const admitted = await engine.admitArrow(ipc);
    const answer: BatchAnswerJson = {
      accepted: admitted.rows,
      duplicates: admitted.duplicates,
      ids: Array.from({ length: admitted.rows }, (_, row) => admitted.idOf(row)),
      revisions: Array.from({ length: admitted.rows }, (_, row) => admitted.revisionOf(row)),
      duplicate_rows: duplicateRowsJson(admitted, false),
    };
    const one = tableFromIPC(putResultMetadata(admitted, 'ids', ipc));
    const cluster = tableFromIPC(putResultOfAnswer(answer, 'ids'));
    const fields = (table: typeof one): unknown[] => table.schema.fields.map((field) => [field.name, String(field.type), field.nullable]);
    assert.deepEqual(fields(cluster), fields(one));
    const values = (table: typeof one): unknown[] => table.schema.fields.map((field) => [...(table.getChild(field.name) ?? [])].map((value: unknown) => (value !== null && typeof value === 'object' ? [...(value as Iterable<unknown>)] : value)));
    assert.deepEqual(values(cluster), values(one));
    assert.deepEqual([...(cluster.getChild('differs')?.get(0) ?? [])], ['target'], 'the duplicate that differs says where');
    assert.deepEqual(JSON.parse(Buffer.from(putResultOfAnswer(answer, 'counts')).toString('utf8')), JSON.parse(Buffer.from(putResultMetadata(admitted, 'counts', ipc)).toString('utf8')));
  } finally {
    await engine.close();
  }
});

test('an error answer leaves as one node\'s Flight status; a partial batch names the rows accepted, or their count when they are many', () => {
  const partial = relayedFailure(
    new RelayedRefusal(503, 1, { error: { code: 'PARTITION_MOVING', message: 'partition 1 is moving between nodes', accepted: 2, accepted_rows: [0, 2], ids: ['x', null, 'y'] } as RelayedRefusal['body']['error'] }),
    4,
  );
  assert.equal(partial.code, status.UNAVAILABLE);
  assert.equal(partial.details, "PARTITION_MOVING: partition 1 is moving between nodes (record batch 4 of the stream) (retry in 1 s); 2 of the batch's rows were accepted and are durable: rows 0, 2; sending the batch again is safe (the accepted rows answer as duplicates)");
  assert.deepEqual([partial.metadata.get('fermata-batch'), partial.metadata.get('fermata-code'), partial.metadata.get('fermata-accepted'), partial.metadata.get('fermata-accepted-rows')], [['4'], ['PARTITION_MOVING'], ['2'], ['0, 2']]);

  const many = Array.from({ length: 300 }, (_, row) => row * 2);
  const large = relayedFailure(new RelayedRefusal(503, 1, { error: { code: 'LOG_UNAVAILABLE', message: 'the database is out of reach', accepted_rows: many } as RelayedRefusal['body']['error'] }));
  assert.equal(large.code, status.UNAVAILABLE);
  assert.match(large.details, /; 300 of the batch's rows were accepted and are durable, the first of them rows 0, 2, .*, 398, …; sending/);
  assert.deepEqual([large.metadata.get('fermata-accepted'), large.metadata.get('fermata-accepted-rows')], [['300'], []]);

  const invalid = relayedFailure(new RelayedRefusal(400, undefined, { error: { code: 'BATCH_INVALID', message: 'fire_at must be Timestamp or Int64', column: 'fire_at', row: 3 } }), 0);
  assert.deepEqual([invalid.code, invalid.details, invalid.metadata.get('fermata-column'), invalid.metadata.get('fermata-row')], [status.INVALID_ARGUMENT, 'BATCH_INVALID: fire_at must be Timestamp or Int64 (record batch 0 of the stream)', ['fire_at'], ['3']]);
  // A code of the HTTP layer alone goes by its HTTP status.
  assert.equal(relayedFailure(new RelayedRefusal(413, undefined, { error: { code: 'BODY_TOO_LARGE', message: 'too large' } })).code, status.RESOURCE_EXHAUSTED);
});
