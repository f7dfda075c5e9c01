// An add's trace context through the cluster front (two in-process nodes, P = 4: node A owns
// partitions 0 and 1, node B 2 and 3), read back from each timer's headers: a single JSON add
// and an NDJSON batch through node A keep the request's traceparent whether their partition is
// A's or B's (the forwarded request carries it); an Arrow batch split across the nodes does not
// take it, as on one node (its rows carry theirs in `headers`).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { batchToArrow } from '../helpers/arrow.ts';
import { closeFixtureNodes, type FixtureNode, fixtureKeyIn, startFixtureNodes } from '../helpers/fixture-nodes.ts';

const nodes: FixtureNode[] = [];
const later = Date.now() + 3_600_000;
const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

/** A key whose partition is `partition`, the n-th such. */
const keyIn = (partition: number, n: number, prefix: string): string => fixtureKeyIn(partition, n, prefix);

before(async () => {
  nodes.push(...(await startFixtureNodes()));
});

after(async () => {
  await closeFixtureNodes(nodes);
});

const nodeA = (): string => (nodes[0] as (typeof nodes)[number]).url;

/** Adds through node A; the ids it answers. */
async function add(contentType: string, body: string | Uint8Array): Promise<string[]> {
  const response = await fetch(`${nodeA()}/v1/timers`, { method: 'POST', headers: { 'content-type': contentType, traceparent }, body });
  const answer = (await response.json()) as { id?: string; ids?: string[] };
  assert.equal(response.status, 201, JSON.stringify(answer));
  return answer.ids ?? [answer.id as string];
}

async function traceOf(id: string): Promise<string | undefined> {
  const view = (await (await fetch(`${nodeA()}/v1/timers/${id}`)).json()) as { headers: Record<string, string> };
  return view.headers.traceparent;
}

test("JSON and NDJSON adds keep the request's traceparent in every partition, here or forwarded", async () => {
  const ids = [];
  for (const partition of [0, 2]) ids.push(...(await add('application/json', JSON.stringify({ fire_at: later, target: 'https://example.com/hook', key: keyIn(partition, 0, 'json') }))));
  const lines = [0, 1, 2, 3].map((partition) => JSON.stringify({ fire_at: later, target: 'https://example.com/hook', key: keyIn(partition, 0, 'ndjson') }));
  ids.push(...(await add('application/x-ndjson', lines.join('\n'))));
  // Wholly in partition 3 (node B's): forwarded whole.
  ids.push(...(await add('application/x-ndjson', JSON.stringify({ fire_at: later, target: 'https://example.com/hook', key: keyIn(3, 1, 'ndjson') }))));
  assert.equal(ids.length, 7);
  for (const id of ids) assert.equal(await traceOf(id), traceparent, id);
});

test('an Arrow batch split across the nodes does not take the request traceparent', async () => {
  const specs = [0, 3].map((partition) => ({ fireAtMs: later, target: 'https://example.com/hook', key: keyIn(partition, 0, 'arrow') }));
  const ids = await add('application/vnd.apache.arrow.stream', batchToArrow(batchFromSpecs(specs)));
  assert.equal(ids.length, 2);
  for (const id of ids) assert.equal(await traceOf(id), undefined, id);
});
