// The dashboard's routes on a cluster node (ingest/http/cluster/dashboard-routes.ts), over two
// in-process nodes (each a real HTTP server with real engines, P = 4: node A owns partitions 0
// and 1, node B 2 and 3): the due histogram and the one-second series from either node are the
// cluster's (each node's `?scope=node` part added up), a partition without an owner fails them
// with 503 PARTITION_MOVING, and GET /v1/events sends the cluster's counters and the changes of a
// timer another node owns.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { closeFixtureNodes, type FixtureNode, fixtureKeyIn, fixturePartitions, startFixtureNodes } from '../helpers/fixture-nodes.ts';

const partitions = fixturePartitions;
const nodes: FixtureNode[] = [];
const target = 'https://example.com/hook';

/** A key whose partition is `partition`, the n-th such. */
const keyIn = (partition: number, n: number): string => fixtureKeyIn(partition, n, 'd');

before(async () => {
  nodes.push(...(await startFixtureNodes()));
});

after(async () => {
  await closeFixtureNodes(nodes);
});

const [a, b] = [() => nodes[0] as (typeof nodes)[number], () => nodes[1] as (typeof nodes)[number]];

async function getJson<T>(url: string): Promise<{ status: number; headers: Headers; json: T }> {
  const response = await fetch(url);
  return { status: response.status, headers: response.headers, json: (await response.json()) as T };
}

async function add(url: string, delayMs: number, key: string): Promise<string> {
  const response = await fetch(`${url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ delay_ms: delayMs, target, key }) });
  assert.equal(response.status, 201, await response.clone().text());
  return ((await response.json()) as { id: string }).id;
}

interface Histogram {
  readonly buckets: { name: string; until_ms: number | null; count: number }[];
  readonly total: number;
  readonly resident: number;
  readonly spilled: number;
}

interface Series {
  readonly at_ms: number[];
  readonly adds: number[];
}

/** Timers in each bucket, from the partitions' engines themselves. */
const counts = (histogram: Histogram): number[] => histogram.buckets.map((bucket) => bucket.count);

// Added in the first test: how many of them each bucket (minute, hour, day, month, beyond) holds.
const spread: readonly (readonly [number, number])[] = [
  [10_000, 3],
  [1_800_000, 2],
  [7_200_000, 1],
  [10 * 86_400_000, 2],
  [60 * 86_400_000, 1],
];

test('the due histogram from either node is the cluster\'s: every partition\'s timers, each node\'s part added up', async () => {
  let n = 0;
  for (const [delayMs, many] of spread) {
    for (let i = 0; i < many; i++) {
      // Keyed into every partition in turn, through either node.
      await add((n % 2 === 0 ? a() : b()).url, delayMs, keyIn(n % partitions, n));
      n++;
    }
  }
  const expected = spread.map(([, many]) => many);
  for (const node of [a(), b()]) {
    const whole = await getJson<Histogram>(`${node.url}/v1/stats/due-histogram`);
    assert.equal(whole.status, 200, JSON.stringify(whole.json));
    assert.deepEqual(counts(whole.json), expected);
    assert.equal(whole.json.total, n);
    assert.equal(whole.json.resident, n);
  }
  const partA = await getJson<Histogram>(`${a().url}/v1/stats/due-histogram?scope=node`);
  const partB = await getJson<Histogram>(`${b().url}/v1/stats/due-histogram?scope=node`);
  assert.deepEqual(
    counts(partA.json).map((count, k) => count + (counts(partB.json)[k] as number)),
    expected,
  );
  const engineTotal = (node: (typeof nodes)[number]): number => node.directory.owned().reduce((sum, p) => sum + (node.directory.engineOf(p)?.stats().pending ?? 0), 0);
  assert.equal(partA.json.total, engineTotal(a()));
  assert.equal(partB.json.total, engineTotal(b()));
  assert.ok(partA.json.total > 0 && partB.json.total > 0, 'both nodes hold some');
  const bad = await getJson<{ error: { code: string; field: string } }>(`${a().url}/v1/stats/due-histogram?scope=world`);
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.code, 'REQUEST_INVALID');
});

test('a partition with no owner fails the cluster\'s histogram and series with 503 PARTITION_MOVING; this node\'s part is still given', async () => {
  a().directory.setAddress(3, undefined);
  try {
    for (const path of ['/v1/stats/due-histogram', '/v1/stats/series']) {
      const moving = await getJson<{ error: { code: string } }>(`${a().url}${path}`);
      assert.equal(moving.status, 503, path);
      assert.equal(moving.json.error.code, 'PARTITION_MOVING');
      assert.equal(moving.headers.get('retry-after'), '1');
      assert.equal((await fetch(`${a().url}${path}?scope=node`)).status, 200);
    }
  } finally {
    a().directory.setAddress(3, b().address);
  }
});

test('the cluster\'s series adds up the nodes\' seconds: the adds through both nodes, each counted once', async () => {
  // A second after the adds before, and from a whole second on: a sample taken after `from` counts none of theirs.
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  const from = Math.ceil(Date.now() / 1000) * 1000;
  await new Promise((resolve) => setTimeout(resolve, from - Date.now() + 1));
  const adds = 6;
  for (let i = 0; i < adds; i++) await add((i % 2 === 0 ? a() : b()).url, 3_600_000, `series-${i}`);
  const sum = (series: Series): number => series.at_ms.reduce((total, atMs, i) => (atMs > from ? total + (series.adds[i] as number) : total), 0);
  // The seconds the adds fell in end, and are sampled, within about two seconds.
  const deadline = Date.now() + 10_000;
  let whole: Series;
  for (;;) {
    whole = (await getJson<Series>(`${a().url}/v1/stats/series`)).json;
    if (sum(whole) >= adds || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.equal(sum(whole), adds);
  assert.ok(whole.at_ms.every((atMs) => atMs % 1000 === 0), 'the cluster\'s samples are keyed by whole seconds');
  const [partA, partB] = await Promise.all([a(), b()].map(async (node) => (await getJson<Series>(`${node.url}/v1/stats/series?scope=node`)).json));
  assert.equal(sum(partA as Series) + sum(partB as Series), adds, 'each node counted its own partitions\' adds');
  // A poller passing the last second it has gets only the seconds after it.
  const last = whole.at_ms[whole.at_ms.length - 1] as number;
  const next = (await getJson<Series>(`${b().url}/v1/stats/series?after_ms=${last}`)).json;
  assert.ok(next.at_ms.every((atMs) => atMs > last));
});

/** Reads server-sent events from `url` until `enough` says so (or 10 s pass); the events read. */
async function readEvents(url: string, enough: (events: { name: string; data: Record<string, unknown> }[]) => boolean, during?: () => Promise<void>): Promise<{ name: string; data: Record<string, unknown> }[]> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 10_000);
  const events: { name: string; data: Record<string, unknown> }[] = [];
  try {
    const response = await fetch(url, { signal: abort.signal });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let started = false;
    while (!enough(events)) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const name = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (name !== undefined && data !== undefined) events.push({ name, data: JSON.parse(data) as Record<string, unknown> });
      }
      if (!started && events.length > 0 && during !== undefined) {
        started = true;
        await during();
      }
    }
    await reader.cancel();
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  return events;
}

test('GET /v1/events on a cluster node: the cluster\'s counters once a second, and a timer another node owns watched', async () => {
  const id = await add(a().url, 3_600_000, keyIn(2, 100));
  const events = await readEvents(
    `${a().url}/v1/events?watch=${id}`,
    (seen) => seen.some((event) => event.name === 'timer' && event.data.state === 'cancelled') && seen.filter((event) => event.name === 'counters').length >= 2,
    async () => {
      const cancelled = await fetch(`${b().url}/v1/timers/${id}`, { method: 'DELETE' });
      assert.equal(cancelled.status, 200);
    },
  );
  const timers = events.filter((event) => event.name === 'timer');
  assert.deepEqual(
    timers.map((event) => [event.data.id, event.data.state]),
    [
      [id, 'pending'],
      [id, 'cancelled'],
    ],
  );
  const counters = events.filter((event) => event.name === 'counters');
  const stats = (await getJson<{ cluster: { totals: { pending: number } } }>(`${a().url}/v1/stats`)).json;
  const last = counters[counters.length - 1]?.data as { sample: { adds: number } | null; stats: { node: unknown; cluster: { nodes: number; totals: { pending: number } } } };
  assert.equal(last.stats.cluster.nodes, 2, 'the counters carry the cluster\'s stats');
  assert.equal(last.stats.cluster.totals.pending, stats.cluster.totals.pending);
  assert.ok(last.sample !== null, 'and the second this node just sampled');
  const unknown = await fetch(`${b().url}/v1/events?watch=00${'0'.repeat(25)}`);
  assert.equal(unknown.status, 404);
});
