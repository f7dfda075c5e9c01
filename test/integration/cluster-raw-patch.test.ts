// PATCH /v1/timers/{id} on a cluster node's raw HTTP/2 stream (ingest/http/cluster/raw-patch.ts,
// h2-patch.ts), over two real nodes (cluster/node.ts) on a real PostgreSQL 15, P = 4, each behind
// its own HTTP server, and one single node (an engine on a simulated disk) to compare with:
//
//   - a PATCH of a timer in a partition the node owns is answered on the raw stream (the node's
//     fastify onSend hook, which counts what fastify answers, does not see it) with the status,
//     headers (but date) and body the front's route gives the same request (sent with a query
//     string, which the raw path leaves to fastify) and a single node gives: a reschedule,
//     bad bodies, an unknown id, a stale If-Match
//   - one of the other node's partition goes to fastify and is forwarded to its owner, whose
//     route (not its raw path) applies it; a forwarded one is the route's (without the cluster
//     secret 401 even for a partition owned here; with it, applied by the route here, and for a
//     partition owned elsewhere 503 PARTITION_MOVING with Retry-After)
//
// And, on the same nodes, the occurrences `fermata cluster import` leaves in partition 0 (see
// test/integration/cluster-import.test.ts for the import itself): partition 0's engine is given a
// schedule whose name hashes to a partition of the other node, as the single node had it, and
// its occurrences (the four within the two minutes created ahead; the next comes past this
// test's span) stand for those the import leaves. The schedule as the cluster knows it, in its
// own partition, is deleted through partition 0's owner (forwarded to the schedule's owner,
// which asks partition 0 back over HTTP): partition 0's untouched occurrences are cancelled, one
// a user patched is not. A pause and a replace do the same, a PUT that creates the schedule
// does not, and a DELETE answered 404 (the schedule gone already) still does.
// Every request is bounded in time.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { ClusterNode } from '../../cluster/node.ts';
import { clusterIdOf, clusterIdParts, partitionOfKey } from '../../cluster/partitioning.ts';
import { Engine, systemClock } from '../../engine/engine.ts';
import { createHttpServer, type HttpServer } from '../../ingest/http/server.ts';
import { clusterTestbed, fastLeaseSettings, waitUntil } from '../helpers/cluster-testbed.ts';
import { type H2Answer, H2Client } from '../helpers/h2-client.ts';
import { skipUnlessTool } from '../helpers/tools.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const partitions = 4;
const secret = 'raw-patch-secret';
const requestTimeoutMs = 10_000;
const target = 'http://127.0.0.1:9/hook';
/** An engine id of the right shape that names no timer. */
const unknownId = '0000000zzzzzzzzzm8vgw5r0';

/** A loopback port free a moment ago: the node advertises it before its server listens on it. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function keyIn(partition: number, n: number, prefix: string): string {
  for (let i = 0, found = 0; ; i++) {
    const key = `${prefix}-${i}`;
    if (partitionOfKey(key, partitions) === partition && found++ === n) return key;
  }
}

/** A server answering PATCHes, with the count of answers its fastify sent. */
interface Served {
  readonly app: HttpServer;
  readonly client: H2Client;
  fastify: number;
}

interface Member extends Served {
  readonly node: ClusterNode;
}

/** `more` with the server answering PATCHes, a session to it and the count of answers its fastify sent. */
async function served<T extends object>(app: HttpServer, listen: () => Promise<string>, more: T): Promise<Served & T> {
  const counted = Object.assign(more, { app, fastify: 0, client: undefined as H2Client | undefined });
  app.addHook('onSend', (_request, _reply, payload, done) => {
    counted.fastify++;
    done(null, payload);
  });
  counted.client = await H2Client.connect(await listen(), requestTimeoutMs);
  return counted as Served & T;
}

function request(to: Served, method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<H2Answer> {
  return to.client.request({ method, path, headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers }, ...(body === undefined ? {} : { body }) });
}

async function add(to: Served, timer: object): Promise<string> {
  const answer = await request(to, 'POST', '/v1/timers', JSON.stringify(timer));
  assert.equal(answer.status, 201, answer.body.toString());
  return (JSON.parse(answer.body.toString('utf8')) as { id: string }).id;
}

/**
 * `body` PATCHed to `id` at `to`, asserting which answered it: the raw path, fastify (a request
 * the raw path declines), or the route (sent with a query string, which the raw path leaves to fastify).
 */
async function patch(to: Served, id: string, body: string, headers: Record<string, string>, way: 'raw' | 'fastify' | 'route'): Promise<H2Answer> {
  const before = to.fastify;
  const answer = await request(to, 'PATCH', `/v1/timers/${id}${way === 'route' ? '?via=fastify' : ''}`, body, headers);
  assert.equal(to.fastify, before + (way === 'raw' ? 0 : 1), way === 'raw' ? 'the raw path answered it' : 'fastify answered it');
  return answer;
}

/** The headers but date and content-length (a cluster id is 3 characters longer), which is checked against the body. */
const headersOf = (answer: H2Answer): Record<string, string> => {
  const { date, 'content-length': length, ...rest } = answer.headers;
  assert.ok(date !== undefined, 'an answer has a date');
  assert.equal(length, String(answer.body.length));
  return rest;
};

/** The body with each id named set aside, and created_at (timers added alike differ only there). */
const bodyText = (answer: H2Answer, ids: readonly string[]): string => {
  let text = answer.body.toString('utf8');
  for (const id of ids) text = text.replaceAll(id, 'ID');
  return text.replace(/"created_at":"[^"]*"/, '"created_at":"T"');
};

/** Same status, headers (but date; content-length as long as the body) and body, each answer's own ids set aside. */
function assertSame(what: string, ...answers: { answer: H2Answer; ids: readonly string[] }[]): void {
  const [first, ...rest] = answers;
  assert.ok(first !== undefined);
  for (const other of rest) {
    assert.equal(other.answer.status, first.answer.status, `${what}: ${first.answer.body.toString()} / ${other.answer.body.toString()}`);
    assert.deepEqual(headersOf(other.answer), headersOf(first.answer), what);
    assert.equal(bodyText(other.answer, other.ids), bodyText(first.answer, first.ids), what);
  }
}

describe('PATCH on a cluster node\'s raw HTTP/2 stream', { skip: skipUnlessTool('initdb'), timeout: 120_000 }, () => {
  const { pool, newCluster } = clusterTestbed('rawpatch');

  async function start(url: string, nodeId: string, dirs: string[]): Promise<Member> {
    const dataDir = mkdtempSync(join(tmpdir(), `fermata-rawpatch-${nodeId}-`));
    dirs.push(dataDir);
    const port = await freePort();
    const node = await ClusterNode.start({
      sql: pool(url),
      nodeId,
      advertise: `127.0.0.1:${port}`,
      dataDir,
      logger: pino({ level: 'silent' }),
      clock: systemClock,
      leaseSettings: fastLeaseSettings,
      dispatch: { threads: 1, allow: [], allowLoopback: true, signingSecrets: [], ca: undefined },
    });
    await waitUntil(`${nodeId} to own a partition`, 10_000, () => node.owned().length > 0);
    const app = createHttpServer({ logger: pino({ level: 'silent' }), cluster: { directory: node, secret, forwardTimeoutMs: 2000, clock: systemClock } });
    return served(app, () => app.listen({ host: '127.0.0.1', port }), { node });
  }

  // Nested, so that its hooks run inside the testbed's: the nodes stop before PostgreSQL does.
  describe('two nodes and a single node', () => {
    const members: Member[] = [];
    let single: (Served & { engine: Engine }) | undefined;
    const dirs: string[] = [];
    before(async () => {
      const url = await newCluster(partitions);
      members.push(await start(url, 'node-a', dirs));
      members.push(await start(url, 'node-b', dirs));
      const [a, b] = members as [Member, Member];
      await waitUntil('the partitions to be shared two and two', 15_000, () => a.node.owned().length === 2 && b.node.owned().length === 2);
      for (let partition = 0; partition < partitions; partition++) {
        await waitUntil(`both nodes to know partition ${partition}'s owner`, 5_000, () => a.node.ownerAddress(partition) !== undefined && a.node.ownerAddress(partition) === b.node.ownerAddress(partition));
      }
      const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 35 }) });
      const app = createHttpServer({ logger: pino({ level: 'silent' }), engine });
      single = await served(app, () => app.listen({ host: '127.0.0.1', port: 0 }), { engine });
    });
    after(async () => {
      for (const member of [...members, ...(single === undefined ? [] : [single])]) {
        member.client.close();
        await member.app.close();
      }
      for (const member of members) await member.node.stop();
      await single?.engine.close();
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    });

    test('a timer of a partition owned here is patched on the raw stream, answered as the route and a single node answer; another node\'s is forwarded', async () => {
      const [a, b] = members as [Member, Member];
      const one = single as Served;
      const timer = { fire_at: '2030-01-31T09:00:00.000Z', target, payload: 'hello', headers: { 'x-a': 'b' } };
      // Unkeyed adds land in a partition of the node asked: each case patches three timers alike,
      // on node a's raw path, through its fastify route and on the single node.
      const trio = async (): Promise<{ raw: string; route: string; single: string }> => ({ raw: await add(a, timer), route: await add(a, timer), single: await add(one, timer) });
      const all = async (ids: { raw: string; route: string; single: string }, body: string, headers: Record<string, string> = {}): Promise<void> => {
        const raw = await patch(a, ids.raw, body, headers, 'raw');
        const route = await patch(a, ids.route, body, headers, 'route');
        const alone = await patch(one, ids.single, body, headers, 'raw');
        assertSame(`PATCH ${body} ${JSON.stringify(headers)}`, { answer: raw, ids: [ids.raw] }, { answer: route, ids: [ids.route] }, { answer: alone, ids: [ids.single] });
      };

      const ids = await trio();
      const parts = clusterIdParts(ids.raw, partitions);
      assert.ok(parts !== undefined && a.node.owned().includes(parts.partition), 'the timer is in a partition of node a');
      const reschedule = JSON.stringify({ fire_at: '2030-02-01T10:00:00.000Z', payload: 'changed' });
      const raw = await patch(a, ids.raw, reschedule, {}, 'raw');
      assert.equal(raw.status, 200, raw.body.toString());
      assert.equal(raw.headers.etag, '"2"');
      assert.equal((JSON.parse(raw.body.toString('utf8')) as { id: string }).id, ids.raw, 'the answer names the timer by its cluster id');
      const changed = a.node.engineOf(parts.partition)?.get(parts.engineId);
      assert.equal(changed?.fireAtMs, Date.parse('2030-02-01T10:00:00.000Z'));
      assert.equal(changed?.revision, 2);
      assertSame(
        'reschedule',
        { answer: raw, ids: [ids.raw] },
        { answer: await patch(a, ids.route, reschedule, {}, 'route'), ids: [ids.route] },
        { answer: await patch(one, ids.single, reschedule, {}, 'raw'), ids: [ids.single] },
      );

      // Refusals: the body, If-Match, an unknown id of a partition owned here.
      for (const body of ['{"key":"k"}', '{}', '[1]', '{"fire_at":"soon"}', '{"delay_ms":', '{"colour":"red"}']) await all(await trio(), body);
      const stale = await trio();
      await all(stale, JSON.stringify({ payload: 'x' }), { 'if-match': '"7"' });
      await all(stale, JSON.stringify({ payload: 'x' }), { 'if-match': 'W/"1"' });
      const unknown = { raw: clusterIdOf(parts.partition, unknownId), route: clusterIdOf(parts.partition, unknownId), single: unknownId };
      await all(unknown, JSON.stringify({ payload: 'x' }));
      assert.equal(JSON.parse((await patch(a, unknown.raw, '{"payload":"x"}', {}, 'raw')).body.toString('utf8')).error.code, 'NOT_FOUND');

      // The other node's timer: node a's fastify forwards it, node b's fastify applies it (a
      // forwarded request is the route's); node b patches its own on its raw path.
      const [remotePartition] = b.node.owned() as [number];
      const remote = await add(a, { ...timer, key: keyIn(remotePartition, 0, 'remote') });
      const bBefore = b.fastify;
      const forwarded = await patch(a, remote, JSON.stringify({ payload: 'via a' }), { 'if-match': '"1"' }, 'fastify');
      assert.equal(forwarded.status, 200, forwarded.body.toString());
      assert.equal(b.fastify, bBefore + 1, 'node b\'s route answered the forwarded PATCH');
      assert.equal(forwarded.headers.etag, '"2"');
      assert.equal((JSON.parse(forwarded.body.toString('utf8')) as { id: string }).id, remote);
      const atB = await patch(b, remote, JSON.stringify({ payload: 'at b' }), { 'if-match': '"2"' }, 'raw');
      assert.equal(atB.status, 200, atB.body.toString());
      assert.equal(atB.headers.etag, '"3"');

      // A forwarded PATCH is the route's: its secret checked even for a partition owned here, and
      // never forwarded again.
      const local = await add(a, timer);
      const noSecret = await patch(a, local, '{"payload":"x"}', { 'fermata-forwarded': '1' }, 'fastify');
      assert.equal(noSecret.status, 401, noSecret.body.toString());
      const withSecret = await patch(a, local, '{"payload":"x"}', { 'fermata-forwarded': '1', 'fermata-cluster-secret': secret }, 'fastify');
      assert.equal(withSecret.status, 200, withSecret.body.toString());
      const hop = await patch(a, remote, '{"payload":"x"}', { 'fermata-forwarded': '1', 'fermata-cluster-secret': secret }, 'fastify');
      assert.equal(hop.status, 503, hop.body.toString());
      assert.equal(JSON.parse(hop.body.toString('utf8')).error.code, 'PARTITION_MOVING');
      assert.ok(hop.headers['retry-after'] !== undefined);
    });

    test('a schedule deleted, paused or replaced through the cluster also cancels the untouched occurrences partition 0 holds of it', async () => {
      const [a, b] = members as [Member, Member];
      const zero = a.node.owned().includes(0) ? a : b;
      const other = zero === a ? b : a;
      const engine0 = zero.node.engineOf(0);
      assert.ok(engine0 !== undefined);
      let n = 0;
      /** A schedule name of a partition of the other node, with occurrences pending in partition 0 as an import leaves them; their ids. */
      const leftIn0 = async (): Promise<{ name: string; ids: string[] }> => {
        let name = `left-${n++}`;
        while (!other.node.owned().includes(partitionOfKey(name, partitions))) name = `left-${n++}`;
        // Four occurrences 20 s apart from a minute on: all within the two minutes created ahead.
        await engine0.putSchedule(name, { everyMs: 20_000, startAtMs: Date.now() + 60_000, target, queue: 'default', payload: new TextEncoder().encode('tick'), headers: '' });
        await waitUntil('partition 0 to create the occurrences ahead', 10_000, async () => (await pendingIn0(name)).length >= 3);
        return { name, ids: await pendingIn0(name) };
      };
      const pendingIn0 = async (name: string): Promise<string[]> =>
        (await engine0.listTimers({ keyPrefix: new TextEncoder().encode(`schedule:${name}:`), state: 'pending' }, 100)).timers.map((view) => view.id);
      const rule = JSON.stringify({ every_ms: 3_600_000, start_at: new Date(Date.now() + 3_600_000).toISOString(), target });
      const put = async (name: string): Promise<void> => assert.equal((await request(other, 'PUT', `/v1/schedules/${name}`, rule)).status, 200);

      // DELETE through partition 0's owner (forwarded to the schedule's, which asks partition 0
      // back): the occurrence a user patched stays.
      const deleted = await leftIn0();
      await put(deleted.name);
      const touched = deleted.ids[0] as string;
      assert.equal((await request(zero, 'PATCH', `/v1/timers/${clusterIdOf(0, touched)}`, '{"payload":"mine"}')).status, 200);
      const answer = await request(zero, 'DELETE', `/v1/schedules/${deleted.name}`);
      assert.equal(answer.status, 200, answer.body.toString());
      assert.deepEqual(await pendingIn0(deleted.name), [touched], 'the untouched occurrences in partition 0 are cancelled, the patched one is not');
      for (const id of deleted.ids.slice(1)) assert.equal(engine0.get(id)?.state, 'cancelled', id);
      assert.equal((await request(other, 'GET', `/v1/schedules/${deleted.name}`)).status, 404);

      // A pause and a replace through the schedule's owner; a DELETE of a schedule gone already
      // (404) too, so a DELETE sent again after partition 0 failed to answer finishes the job.
      const paused = await leftIn0();
      await put(paused.name);
      assert.equal((await request(other, 'POST', `/v1/schedules/${paused.name}/pause`)).status, 200);
      assert.deepEqual(await pendingIn0(paused.name), [], 'a pause');
      const replaced = await leftIn0();
      await put(replaced.name);
      assert.ok((await pendingIn0(replaced.name)).length >= 3, 'a PUT that creates the schedule cancels nothing, as on one node');
      await put(replaced.name);
      assert.deepEqual(await pendingIn0(replaced.name), [], 'a replace');
      const gone = await leftIn0();
      assert.equal((await request(other, 'DELETE', `/v1/schedules/${gone.name}`)).status, 404);
      assert.deepEqual(await pendingIn0(gone.name), [], 'a DELETE answered 404');
      for (const { name } of [deleted, paused, replaced, gone]) await engine0.deleteSchedule(name);
    });
  });
});
