// EngineOptions.idPrefix (engine/callbacks.ts): in cluster mode every partition's engine counts
// its own ids, so timers of two partitions can share a 24-character engine id. A callback's
// follow-up names its timer with the partition's prefix first (cluster/node.ts sets it), in its
// body `id`, its `fermata-callback-for` header and its `callback:{id}` key: the cluster id the
// API answered (cluster/partitioning.ts clusterIdOf), distinct across partitions. The record
// holds those bytes, so replay makes the same follow-up whatever the reopened engine's prefix.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clusterIdOf } from '../../cluster/partitioning.ts';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { encodeTimerId } from '../../engine/ids.ts';
import { outcomeKind } from '../../engine/records.ts';
import { outcomesFor } from '../helpers/outcomes.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const t0 = 1_796_220_000_000;
const utf8 = new TextDecoder();
const clock: Clock = { now: () => t0 };

interface FollowUp {
  readonly body: { readonly id: string };
  readonly callbackFor: string | undefined;
  readonly key: string | null | undefined;
}

/** The one follow-up due in `engine`: its body, its `fermata-callback-for` header and its key. */
function followUpOf(engine: Engine): FollowUp {
  const due = engine.takeDue(t0, 10);
  assert.equal(due.count, 1, 'one follow-up');
  const delivery = engine.deliveryOf(due.seqs[0] as number, due.rows[0] as number);
  assert.ok(delivery !== undefined);
  const headers = JSON.parse(utf8.decode(delivery.bytes.subarray(delivery.payloadLength, delivery.payloadLength + delivery.headersLength))) as Record<string, string>;
  return {
    body: JSON.parse(utf8.decode(delivery.bytes.subarray(0, delivery.payloadLength))) as { id: string },
    callbackFor: headers['fermata-callback-for'],
    key: engine.get(encodeTimerId(due.seqs[0] as number, due.rows[0] as number, due.fireAtMs[0] as number))?.key,
  };
}

test('two partitions whose timers share an engine id make callbacks naming each by its own cluster id, replayed the same', async () => {
  const partitions = [0, 37];
  const timerIds: string[] = [];
  const followUps: FollowUp[] = [];
  const filesystems = partitions.map((_, i) => new SimFileSystem({ seed: 61 + i }));
  for (const [i, partition] of partitions.entries()) {
    const engine = await Engine.open({ dataDir, fs: filesystems[i] as SimFileSystem, clock, idPrefix: clusterIdOf(partition, '') });
    const admitted = await engine.admit(batchFromSpecs([{ fireAtMs: t0, target: 'https://a.example/hook', queue: 'q', callback: 'https://cb.example/ok' }]));
    timerIds.push(admitted.idOf(0));
    await engine.settle(outcomesFor(engine.takeDue(t0, 10), outcomeKind.delivered));
    followUps.push(followUpOf(engine));
    await engine.close();
  }
  assert.equal(timerIds[0], timerIds[1], 'the two engines gave their timers the same 24-character id');
  const clusterIds = partitions.map((partition, i) => clusterIdOf(partition, timerIds[i] as string));
  assert.notEqual(clusterIds[0], clusterIds[1]);
  for (const [i, followUp] of followUps.entries()) {
    const clusterId = clusterIds[i] as string;
    assert.equal(clusterId.length, 27);
    assert.deepEqual([followUp.body.id, followUp.callbackFor, followUp.key], [clusterId, clusterId, `callback:${clusterId}`], `partition ${partitions[i]}: body id, header and key name the cluster id`);
  }
  // Reopened without the prefix: the follow-up comes from the record's bytes, not from the option.
  const reopened = await Engine.open({ dataDir, fs: filesystems[1] as SimFileSystem, clock });
  assert.deepEqual(followUpOf(reopened), followUps[1], 'replay made the same follow-up');
  await reopened.close();
});

test('without a prefix a callback names the timer by its engine id, as a single node answers it', async () => {
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 67 }), clock });
  const admitted = await engine.admit(batchFromSpecs([{ fireAtMs: t0, target: 'https://a.example/hook', queue: 'q', callback: 'https://cb.example/ok' }]));
  await engine.settle(outcomesFor(engine.takeDue(t0, 10), outcomeKind.delivered));
  const id = admitted.idOf(0);
  assert.equal(id.length, 24);
  const followUp = followUpOf(engine);
  assert.deepEqual([followUp.body.id, followUp.callbackFor, followUp.key], [id, id, `callback:${id}`]);
  await engine.close();
});
