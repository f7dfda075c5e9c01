// Arrow Flight and the streamed Arrow export over two in-process cluster nodes (each a real HTTP
// server with real engines, P = 4: node A owns partitions 0 and 1, node B 2 and 3; node A's
// forwarding timeout is short, 600 ms), without PostgreSQL:
//
//   - Flight on node A (the FlightService over node A's front, as `fermata serve --cluster
//     --flight` builds it): a keyed batch spanning the four partitions while partition 3 has no
//     owner is UNAVAILABLE naming the six rows accepted (text and trailing metadata), no
//     PutResult; sent again once the partition has an owner, its PutResult's ids are cluster ids
//     in each key's partition, the six rows duplicates; the counts form gives the first cluster
//     id; DoGet and DoAction are UNIMPLEMENTED saying why
//   - the Arrow export through node A of node B's partition 2, whose export takes longer than
//     the forwarding timeout (each chunk of its engine's export 100 ms after the one before): whole, every
//     timer of every partition, passed on as it arrives; an owner silent for longer than the
//     timeout between two chunks cuts the response short, without the stream's end marker
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { status } from '@grpc/grpc-js';
import { tableFromIPC } from 'apache-arrow';
import pino from 'pino';
import { clusterIdParts } from '../../cluster/partitioning.ts';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import type { Engine } from '../../engine/engine.ts';
import { Access } from '../../ingest/auth/access.ts';
import { clusterFlightTimers, clusterPullUnserved } from '../../ingest/flight/cluster-flight-timers.ts';
import { flightDataOf, FlightTestClient, timersDescriptor } from '../../ingest/flight/flight-client.ts';
import { type FlightListener, FlightService } from '../../ingest/flight/flight-service.ts';
import { batchToArrow } from '../helpers/arrow.ts';
import { closeFixtureNodes, type FixtureNode, fixtureKeyIn, fixturePartitions, startFixtureNodes } from '../helpers/fixture-nodes.ts';

const partitions = fixturePartitions;
const forwardTimeoutMs = 600;
const later = Date.now() + 3_600_000;
const nodes: FixtureNode[] = [];
let flight: FlightListener | undefined;

/** A key whose partition is `partition`, the n-th such. */
const keyIn = (partition: number, n: number, prefix = 'flight'): string => fixtureKeyIn(partition, n, prefix);

const ownerOf = (partition: number): (typeof nodes)[number] => nodes[partition < 2 ? 0 : 1] as (typeof nodes)[number];

before(async () => {
  nodes.push(...(await startFixtureNodes(forwardTimeoutMs)));
  const a = nodes[0] as (typeof nodes)[number];
  const service = new FlightService({
    timers: clusterFlightTimers(async (request) => {
      const answer = await a.app.inject({ method: request.method, url: request.url, headers: request.headers, ...(request.body === undefined ? {} : { payload: request.body }) });
      return { status: answer.statusCode, headers: answer.headers, body: answer.rawPayload };
    }),
    logger: pino({ level: 'silent' }),
    access: new Access([]),
  });
  flight = await service.listen('127.0.0.1', 0);
});

after(async () => {
  await flight?.close();
  await closeFixtureNodes(nodes);
});

test('Flight on a cluster node: a batch that lands in part is UNAVAILABLE naming the rows accepted; sent again it completes, with cluster ids', async () => {
  assert.ok(flight !== undefined);
  const keys = [0, 0, 1, 1, 2, 2, 3, 3].map((partition, row) => keyIn(partition, row % 2));
  const ipc = batchToArrow(batchFromSpecs(keys.map((key) => ({ fireAtMs: later, target: 'https://example.com/hook', key }))));
  const withIds = new FlightTestClient(flight.url, { ids: true });
  const counts = new FlightTestClient(flight.url);
  const a = nodes[0] as (typeof nodes)[number];
  try {
    a.directory.setAddress(3, undefined);
    const partial = await withIds.doPut(flightDataOf(timersDescriptor(), [ipc]));
    assert.equal(partial.error?.code, status.UNAVAILABLE, partial.error?.details);
    assert.match(partial.error.details, /^PARTITION_MOVING: partition 3 is moving .* \(record batch 0 of the stream\) \(retry in 1 s\); 6 of the batch's rows were accepted and are durable: rows 0, 1, 2, 3, 4, 5; sending the batch again is safe/);
    assert.deepEqual([partial.error.metadata.get('fermata-accepted'), partial.error.metadata.get('fermata-accepted-rows')], [['6'], ['0, 1, 2, 3, 4, 5']]);
    assert.equal(partial.results.length, 0, 'no PutResult for a batch that did not land whole');

    a.directory.setAddress(3, ownerOf(3).address);
    const whole = await withIds.doPut(flightDataOf(timersDescriptor(), [ipc]));
    assert.equal(whole.error, undefined, whole.error?.details);
    assert.equal(whole.results.length, 1);
    const answer = tableFromIPC(whole.results[0] as Buffer);
    const ids = [...(answer.getChild('id') ?? [])] as string[];
    assert.deepEqual(ids.map((id) => clusterIdParts(id, partitions)?.partition), [0, 0, 1, 1, 2, 2, 3, 3], "each id names its key's partition");
    assert.deepEqual([...(answer.getChild('duplicate') ?? [])], [true, true, true, true, true, true, false, false], 'the rows accepted before are duplicates');
    assert.deepEqual([...(answer.getChild('revision') ?? [])], [1, 1, 1, 1, 1, 1, 1, 1]);
    assert.deepEqual([...(answer.getChild('state') ?? [])], ['pending', 'pending', 'pending', 'pending', 'pending', 'pending', null, null]);
    for (const [row, id] of ids.entries()) {
      const parts = clusterIdParts(id, partitions);
      assert.equal(ownerOf(parts?.partition ?? -1).directory.engineOf(parts?.partition ?? -1)?.get(parts?.engineId ?? '')?.state, 'pending', `row ${row} in its partition's engine`);
    }

    const again = await counts.doPut(flightDataOf(timersDescriptor(), [ipc]));
    assert.equal(again.error, undefined, again.error?.details);
    assert.deepEqual(JSON.parse((again.results[0] as Buffer).toString('utf8')), { accepted: 8, duplicates: 8, first_id: ids[0] });

    for (const outcome of [await withIds.doGet(Buffer.from('{"queue":"pulled"}')), await withIds.doAction('ack', Buffer.from('lease'))]) {
      assert.equal(outcome.error?.code, status.UNIMPLEMENTED);
      assert.equal(outcome.error.details, clusterPullUnserved);
    }
  } finally {
    a.directory.setAddress(3, ownerOf(3).address);
    withIds.close();
    counts.close();
  }
});

/** Makes `engine`'s exports wait `gapMs` before each chunk (the owner's side of a slow export); the waits hold no process alive, so an export the test cut leaves nothing behind. */
function slowExports(engine: Engine, gapMs: () => number): () => void {
  const exportTimers = engine.exportTimers.bind(engine);
  engine.exportTimers = async function* (...args: Parameters<Engine['exportTimers']>): AsyncGenerator<Uint8Array> {
    for await (const chunk of exportTimers(...args)) {
      await sleep(gapMs(), undefined, { ref: false });
      yield chunk;
    }
  };
  return () => {
    engine.exportTimers = exportTimers;
  };
}

test('the Arrow export through one node streams another node\'s partition, however long its export takes; an owner silent past the timeout cuts it short', async () => {
  const [a, b] = nodes as [(typeof nodes)[number], (typeof nodes)[number]];
  const remote = b.directory.engineOf(2);
  const local = a.directory.engineOf(0);
  assert.ok(remote !== undefined && local !== undefined);
  const rows = 8 * 4096;
  const specs = Array.from({ length: rows }, (_, i) => ({ fireAtMs: later + i, target: 'https://example.com/export', queue: 'exported' }));
  await remote.admit(batchFromSpecs(specs));
  await local.admit(batchFromSpecs(specs.slice(0, 10)));
  // Eight record batches of 4,096 rows, the schema and the end marker: ten chunks, a second in
  // all. Node B's answer holds back its engine's first two chunks (the schema, and a batch until
  // it knows it is not the end marker): its longest wait is 300 ms, half the timeout.
  let gapMs = 100;
  const restore = slowExports(remote, () => gapMs);
  try {
    const response = await fetch(`${a.url}/v1/timers?queue=exported`, { headers: { accept: 'application/vnd.apache.arrow.stream' }, signal: AbortSignal.timeout(30_000) });
    assert.equal(response.status, 200);
    const table = tableFromIPC(new Uint8Array(await response.arrayBuffer()));
    const partitionsOfRows = [...(table.getChild('id') ?? [])].map((id) => clusterIdParts(id as string, partitions)?.partition);
    assert.equal(table.numRows, rows + 10);
    assert.deepEqual([partitionsOfRows.filter((p) => p === 0).length, partitionsOfRows.filter((p) => p === 2).length], [10, rows], "node A's partition, then all of node B's");
    assert.equal(partitionsOfRows.at(-1), 2);

    // One wait longer than the timeout: the response ends without the stream's end marker.
    gapMs = forwardTimeoutMs * 3;
    const cut = await fetch(`${a.url}/v1/timers?queue=exported`, { headers: { accept: 'application/vnd.apache.arrow.stream' }, signal: AbortSignal.timeout(30_000) });
    assert.equal(cut.status, 200);
    await assert.rejects(cut.arrayBuffer(), 'the body is cut short');
  } finally {
    restore();
  }
});
