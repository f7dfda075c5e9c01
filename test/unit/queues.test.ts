import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine } from '../../engine/engine.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { defaultQueueConfig } from '../../engine/queues.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';

test('queue configs are validated, durable, whole replacements, and listed with the queues in use', async () => {
  const fs = new SimFileSystem({ seed: 31 });
  let engine = await Engine.open({ dataDir, fs });
  const billing = await engine.setQueue('billing', { max_attempts: 5, min_backoff_ms: 200, max_backoff_ms: 60_000, rate_per_s: 100 });
  assert.deepEqual(billing, { ...defaultQueueConfig, max_attempts: 5, min_backoff_ms: 200, max_backoff_ms: 60_000, rate_per_s: 100 });
  await engine.admit(batchFromSpecs([{ fireAtMs: Date.now(), target: 'https://a.example/', queue: 'emails' }]));
  await engine.close();

  engine = await Engine.open({ dataDir, fs });
  assert.deepEqual(engine.queues(), [
    { name: 'billing', config: billing, paused: false },
    { name: 'emails', config: defaultQueueConfig, paused: false },
  ]);
  await engine.setQueue('billing', { max_concurrent: 4 });
  assert.deepEqual(engine.queueConfig('billing'), { ...defaultQueueConfig, max_concurrent: 4 }, 'PUT replaces the whole config');
  await engine.close();
});

test('bad queue configs are refused naming the field, and nothing is logged', async () => {
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 32 }) });
  const cases: Array<[string, unknown, string]> = [
    ['q', { max_attempts: 0 }, 'max_attempts'],
    ['q', { max_attempts: 2.5 }, 'max_attempts'],
    ['q', { min_backoff_ms: 5000, max_backoff_ms: 100 }, 'max_backoff_ms'],
    ['q', { colour: 'red' }, 'colour'],
    ['q', { max_attempts: null }, 'max_attempts'],
    ['q', [], ''],
    ['q', { delivery: 'carrier-pigeon' }, 'delivery'],
    ['q', { delivery: 'arrow' }, 'sink'],
    ['q', { delivery: 'arrow', sink: 'ftp://example.com/' }, 'sink'],
    ['q', { sink: 'not a url' }, 'sink'],
    ['q', { sink: 'https://user:pw@example.com/' }, 'sink'],
    ['q', { batch_rows_max: 0 }, 'batch_rows_max'],
    ['q', { linger_ms: -1 }, 'linger_ms'],
    ['bad name', {}, 'name'],
  ];
  for (const [name, input, field] of cases) {
    await assert.rejects(engine.setQueue(name, input), (err) => isFermataError(err, errorCodes.queueInvalid) && err.details.field === field, JSON.stringify(input));
  }
  assert.equal(engine.log.lastSeq, 0);
  await engine.close();
});
