// The cluster mode's error codes as HTTP answers (ingest/http/error-map.ts): a database out of
// reach is a 503 the client may retry after Retry-After; a schema at another version, met by a
// request, is a 500 (a start-up condition).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import { errorAnswer } from '../../ingest/http/error-map.ts';

test('LOG_UNAVAILABLE is a 503 with Retry-After; CLUSTER_SCHEMA_MISMATCH a 500', () => {
  const unavailable = errorAnswer(new FermataError(errorCodes.logUnavailable, 'the cluster database is unavailable (ECONNREFUSED): nothing was appended'), undefined);
  assert.equal(unavailable.status, 503);
  assert.equal(unavailable.retryAfterSeconds, 2);
  assert.deepEqual(unavailable.body, { error: { code: 'LOG_UNAVAILABLE', message: 'the cluster database is unavailable (ECONNREFUSED): nothing was appended' } });
  assert.equal(unavailable.unexpected, false);
  const mismatch = errorAnswer(new FermataError(errorCodes.clusterSchemaMismatch, 'older'), undefined);
  assert.equal(mismatch.status, 500);
  assert.equal(mismatch.retryAfterSeconds, undefined);
});

test('LOG_FENCED (a partition taken over while the database failed over) is a 503 with Retry-After', () => {
  const fenced = errorAnswer(new FermataError(errorCodes.logFenced, 'partition 1 was taken over: its epoch is no longer 2'), undefined);
  assert.equal(fenced.status, 503);
  assert.equal(fenced.retryAfterSeconds, 1);
  assert.equal(fenced.body.error.code, 'LOG_FENCED');
});
