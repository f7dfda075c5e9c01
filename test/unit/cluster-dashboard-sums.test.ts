// How a cluster node adds up the dashboard's figures (ingest/http/cluster/node-series.ts,
// dashboard-routes.ts): the node's series counters stay monotone while partitions come and go
// (a dispatcher counts from 0, an engine from its first reading, taken as the partition comes,
// one that left keeps what it counted), lateness is every dispatcher's histogram added up; the cluster's series sums the
// nodes' samples by the second they were taken in, finished seconds only, with the highest
// lateness of each second; the cluster's histogram sums the counts and names the latest edge.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as hdr from 'hdr-histogram-js';
import type { Engine } from '../../engine/engine.ts';
import { sumHistograms, sumSeries } from '../../ingest/http/cluster/dashboard-routes.ts';
import type { SeriesBody } from '../../ingest/http/routes/stats-series.ts';
import { type DeliveryFigures, nodeSeriesSources, type SeriesDirectory } from '../../ingest/http/cluster/node-series.ts';

const histogram = (): hdr.Histogram => hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: 3 });

/** A partition as the node's sources read it: an engine's adds and syncs, a dispatcher's figures. */
class FakePartition {
  rows = 0;
  syncs = 0;
  delivered = 0;
  failures = 0;
  readonly lateness = histogram();
  readonly engine = { stats: () => ({ rowsInserted: this.rows }), log: { counters: this as { readonly syncs: number } } };
  readonly dispatcher: DeliveryFigures = {
    stats: () => new Map([['q', { delivered: this.delivered }]]),
    failuresByKind: () => [['timeout', this.failures]],
    lateness: this.lateness,
  };
}

function directoryOf(owned: Map<number, FakePartition>, listeners = new Set<() => void>()): SeriesDirectory {
  return {
    partitions: 4,
    nodeId: 'n',
    owned: () => [...owned.keys()],
    engineOf: (partition) => owned.get(partition)?.engine as unknown as Engine | undefined,
    dispatcherOf: (partition) => owned.get(partition)?.dispatcher,
    ownerAddress: () => undefined,
    onChange: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

test("a node's counters grow by what its partitions did, through a takeover and a loss", () => {
  const owned = new Map<number, FakePartition>();
  const sources = nodeSeriesSources(directoryOf(owned));
  const p0 = new FakePartition();
  p0.rows = 500; // replayed when it was taken: not this node's adds
  p0.delivered = 2; // its dispatcher is new: all of it is this node's
  owned.set(0, p0);
  assert.equal(sources.added(), 0);
  assert.equal(sources.delivered(), 2);
  assert.deepEqual([...sources.deliveredByQueue()], [['q', 2]]);
  p0.rows += 10;
  p0.delivered += 3;
  p0.failures += 1;
  assert.equal(sources.added(), 10);
  assert.equal(sources.delivered(), 5);
  assert.equal(sources.failed(), 1);
  const p1 = new FakePartition();
  p1.rows = 40;
  owned.set(1, p1);
  p1.lateness.recordValue(7);
  p0.lateness.recordValue(3);
  assert.equal(sources.added(), 10);
  assert.equal(sources.lateness()?.totalCount, 2);
  p1.rows += 4;
  p1.delivered += 1;
  owned.delete(0); // lost: what it counted stays
  assert.equal(sources.added(), 14);
  assert.equal(sources.delivered(), 6);
  assert.equal(sources.lateness()?.totalCount, 2, 'a lost partition\'s lateness stays in the node\'s');
  // Read once a second in the service: here p0's last 3 came after the queue's last reading, before it left.
  assert.deepEqual([...sources.deliveredByQueue()], [['q', 3]]);
});

test('a partition taken between two samples counts its adds from when it was taken, not from the next sample', () => {
  const owned = new Map<number, FakePartition>();
  const listeners = new Set<() => void>();
  const sources = nodeSeriesSources(directoryOf(owned, listeners));
  assert.equal(sources.added(), 0);
  const taken = new FakePartition();
  taken.rows = 100; // its replay
  owned.set(2, taken);
  for (const listener of listeners) listener();
  taken.rows += 5;
  assert.equal(sources.added(), 5);
  sources.close();
  assert.equal(listeners.size, 0);
});

const body = (atMs: number[], adds: number[], p99: (number | null)[], lastSync: number | null): SeriesBody => ({
  interval_ms: 1000,
  samples_max: 900,
  wal_last_sync_at_ms: lastSync,
  at_ms: atMs,
  adds,
  deliveries: adds.map(() => 1),
  failures: adds.map(() => 0),
  lateness_ms: { p50: p99, p99, max: p99 },
});

test("the cluster's series sums the nodes' samples by the second they were taken in, finished seconds only", () => {
  const a = body([10_200, 11_200, 12_200], [1, 2, 3], [5, null, 9], 11_000);
  const b = body([10_700, 11_700, 12_700], [10, 20, 30], [8, 4, null], 12_000);
  const sum = sumSeries([a, b], 12_000);
  assert.deepEqual(sum.at_ms, [11_000, 12_000], 'the second ending at 13 000 has not ended');
  assert.deepEqual(sum.adds, [11, 22]);
  assert.deepEqual(sum.deliveries, [2, 2]);
  assert.deepEqual(sum.lateness_ms.p99, [8, 4], 'the highest of the nodes\' (null counts as none)');
  assert.equal(sum.wal_last_sync_at_ms, 12_000);
  assert.deepEqual(sumSeries([body([], [], [], null)], 12_000).lateness_ms.max, []);
});

test("the cluster's histogram sums each bucket's counts and names the latest edge any partition used", () => {
  const bucket = (name: string, until: number | null, count: number) => ({ name, until: null, until_ms: until, count });
  const a = { now: '', now_ms: 0, buckets: [bucket('minute', 60_000, 1), bucket('hour', 3_600_000, 2), bucket('day', 86_400_000, 3), bucket('month', 2_592_000_000, 4), bucket('beyond', null, 5)], total: 15, resident: 15, spilled: 0 };
  const b = { ...a, buckets: [bucket('minute', 60_000, 10), bucket('hour', 7_200_000, 20), bucket('day', 86_400_000, 30), bucket('month', 2_592_000_000, 40), bucket('beyond', null, 50)], total: 150, resident: 100, spilled: 50 };
  const sum = sumHistograms(0, [a, b]);
  assert.deepEqual(sum.buckets.map((one) => one.count), [11, 22, 33, 44, 55]);
  assert.deepEqual(sum.buckets.map((one) => one.until_ms), [60_000, 7_200_000, 86_400_000, 2_592_000_000, null]);
  assert.equal(sum.buckets[1]?.until, '1970-01-01T02:00:00.000Z');
  assert.deepEqual([sum.total, sum.resident, sum.spilled], [165, 115, 50]);
  const none = sumHistograms(30_000, []);
  assert.deepEqual(none.buckets.map((one) => one.until_ms), [120_000, 3_660_000, 86_460_000, 2_592_060_000, null], 'no partition: now + each span, to the minute');
  assert.equal(none.total, 0);
});
