// The @fermata/client checks every transport runs against the real `fermata serve`: one service
// per test file (client-h1, client-h2c, client-tls), started with a bearer token, spoken to by
// the client's built JavaScript as a user gets it from npm. Each check says what a user relies
// on: adds durable and deduplicated, batches row-aligned across cuts, compare-and-set, lists
// whole across pages, queues, dead letters and redrive, schedules, stats, typed errors.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { arrowPieces, FermataClient, FermataError, type ClientOptions, type TimerInput } from '@fermata/client';
import { testScratch } from './scratch.ts';
import { type Service, startService } from './service.ts';
import { withTimeout } from './timeout.ts';
import { skipUnlessTool } from './tools.ts';

export type ClientTransport = 'http/1.1' | 'h2c' | 'tls';

export const clientToken = 'client-suite-token-0123456789';

/** A self-signed certificate for 127.0.0.1, made by openssl into `dir`. */
export function selfSignedCert(dir: string): { cert: string; key: string } {
  const pair = { cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem') };
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost', '-keyout', pair.key, '-out', pair.cert], { stdio: 'ignore' });
  return pair;
}

/** A loopback port nothing listens on (taken, then closed). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Polls `check` every 50 ms until it is true, for at most `ms`. */
async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  await withTimeout(
    (async () => {
      while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 50));
    })(),
    ms,
    what,
  );
}

export function clientSuite(transport: ClientTransport): void {
  describe(`@fermata/client over ${transport}`, { timeout: 120_000, skip: transport === 'tls' ? skipUnlessTool('openssl') : false }, () => {
    const scratch = testScratch(`fermata-client-${transport.replace('/', '')}`);
    let service: Service;
    let client: FermataClient;
    let options: ClientOptions;
    let deadTarget: string;
    const target = 'http://127.0.0.1:9/hook';

    before(async () => {
      const dir = scratch.tempDir('data');
      const tls = transport === 'tls' ? selfSignedCert(scratch.tempDir('certs')) : undefined;
      const args = tls === undefined ? [] : ['--tls-cert', tls.cert, '--tls-key', tls.key];
      service = await startService(dir, (child) => scratch.children.add(child), { args, env: { FERMATA_TOKENS: clientToken }, tls: tls !== undefined });
      options =
        tls === undefined
          ? { url: service.url, token: clientToken, protocol: transport === 'h2c' ? 'auto' : 'http/1.1' }
          : { url: service.tlsUrl as string, token: clientToken, tls: { ca: readFileSync(tls.cert) } };
      client = new FermataClient(options);
      deadTarget = `http://127.0.0.1:${await closedPort()}/gone`;
    });

    after(async () => {
      await client.close();
    });

    test('speaks the protocol the server offers, with the token', async () => {
      assert.equal(await client.protocol(), transport === 'http/1.1' ? 'http/1.1' : 'h2');
      const anonymous = new FermataClient({ ...options, token: 'not-the-token-0123456789' });
      try {
        await assert.rejects(anonymous.stats(), (err: unknown) => err instanceof FermataError && err.code === 'UNAUTHORIZED' && err.status === 401);
      } finally {
        await anonymous.close();
      }
      assert.equal((await client.limits()).batch_rows_max, 100_000);
    });

    test('add: durable, a known key answers the original, bad input is a typed error naming the field', async () => {
      const added = await client.add({ delay_ms: 3_600_000, target, key: `${transport}-once`, payload: 'first' });
      assert.deepEqual([added.revision, added.duplicate], [1, false]);
      const again = await client.add({ delay_ms: 3_600_000, target, key: `${transport}-once`, payload: 'second' });
      assert.deepEqual([again.id, again.duplicate, again.state, again.differs], [added.id, true, 'pending', ['payload']]);
      const timer = await client.get(added.id);
      assert.deepEqual([timer.state, timer.payload, timer.key], ['pending', 'first', `${transport}-once`]);
      await assert.rejects(client.add({ delay_ms: 1, target: 'not a url' }), (err: unknown) => err instanceof FermataError && err.status === 400 && err.code === 'BATCH_INVALID' && err.field === 'target');
      await assert.rejects(client.get('0000000000000000000000zz'), (err: unknown) => err instanceof FermataError && err.status === 404 && err.code === 'NOT_FOUND');

      // Many adds at once: each resolves with its own timer, each durable and findable.
      const many = await Promise.all(Array.from({ length: 300 }, (_, i) => client.add({ delay_ms: 3_600_000, target, key: `${transport}-many-${i}`, queue: `${transport.replace('/', '')}-many` })));
      assert.equal(new Set(many.map((one) => one.id)).size, 300);
      for (const i of [0, 150, 299]) assert.equal((await client.get((many[i] as { id: string }).id)).key, `${transport}-many-${i}`);
      let listed = 0;
      for await (const _ of client.list({ queue: `${transport.replace('/', '')}-many` }, { pageSize: 64 })) listed++;
      assert.equal(listed, 300, 'the list pages through every one');
    });

    test('stream(): its own add stream, each add durable, closed by the caller', async () => {
      const stream = client.stream();
      const added = await Promise.all(Array.from({ length: 20 }, (_, i) => stream.add({ fire_at: new Date(Date.now() + 3_600_000), target, payload: `s${i}` })));
      await stream.close();
      assert.equal((await client.get((added[7] as { id: string }).id)).payload, 's7');
      await assert.rejects(stream.add({ delay_ms: 1, target }), (err: unknown) => err instanceof FermataError && err.code === 'STREAM_ENDED');
    });

    test('addMany: Arrow batches, ids row-aligned across cuts, duplicates and a bad row named by the caller\'s row', async () => {
      const queue = `${transport.replace('/', '')}-bulk`;
      const rows: TimerInput[] = Array.from({ length: 9 }, (_, i) => ({
        ...(i % 4 === 3 ? { delay_ms: 3_600_000 } : { fire_at: Date.now() + 3_600_000 + i }),
        target,
        key: `${transport}-bulk-${i}`,
        queue,
        ...(i === 5 ? { payload_base64: Buffer.from([0xff, 0xfe]).toString('base64') } : { payload: `row ${i}` }),
        ...(i === 2 ? { headers: { 'x-row': '2' } } : {}),
      }));
      const first = await client.addMany(rows);
      assert.deepEqual([first.accepted, first.duplicates, first.ids.length], [9, 0, 9]);
      for (const [i, id] of first.ids.entries()) assert.equal((await client.get(id)).key, `${transport}-bulk-${i}`, `row ${i}`);
      assert.deepEqual((await client.get(first.ids[5] as string)).payload_base64, '//4=');
      assert.deepEqual((await client.get(first.ids[2] as string)).headers, { 'x-row': '2' });

      const again = await client.addMany([{ fire_at: Date.now() + 60_000, target, key: 'fresh-' + transport }, ...rows.slice(0, 4)]);
      assert.deepEqual(again.ids.slice(1), first.ids.slice(0, 4));
      assert.deepEqual(again.duplicate_rows.map((row) => row.row), [1, 2, 3, 4]);

      const [piece] = arrowPieces(rows.slice(0, 3).map((row) => ({ ...row, key: `${row.key as string}-arrow` })), await client.limits());
      const arrow = await client.addArrow((piece as { body: Uint8Array }).body);
      assert.deepEqual([arrow.accepted, (await client.get(arrow.ids[2] as string)).key], [3, `${transport}-bulk-2-arrow`]);

      const bad = [...rows.slice(0, 4).map((row, i) => ({ ...row, key: `${transport}-bad-${i}` })), { delay_ms: 1, target: 'ftp://nowhere' }];
      await assert.rejects(client.addMany(bad), (err: unknown) => err instanceof FermataError && err.code === 'BATCH_INVALID' && err.row === 4);
    });

    test('addMany past the server\'s rows a batch: cut at GET /v1/limits, ids in order', { skip: transport !== 'h2c' && 'once is enough: h2c runs it' }, async () => {
      const { batch_rows_max: rowsMax } = await client.limits();
      const fireAt = Date.now() + 3_600_000;
      const rows = Array.from({ length: rowsMax + 2 }, (_, i): TimerInput => ({ fire_at: fireAt, target, key: `limits-${i}` }));
      const added = await client.addMany(rows);
      assert.deepEqual([added.accepted, added.ids.length, new Set(added.ids).size], [rowsMax + 2, rowsMax + 2, rowsMax + 2]);
      for (const i of [0, rowsMax - 1, rowsMax, rowsMax + 1]) assert.equal((await client.get(added.ids[i] as string)).key, `limits-${i}`, `row ${i}`);
      assert.equal((await client.cancelMany({ key_prefix: 'limits-' })).cancelled, rowsMax + 2);
    });

    test('reschedule and cancel with the revision: compare-and-set', async () => {
      const { id } = await client.add({ delay_ms: 3_600_000, target });
      const moved = await client.reschedule(id, { delay_ms: 7_200_000, payload: 'moved' }, { revision: 1 });
      assert.deepEqual([moved.revision, moved.payload], [2, 'moved']);
      await assert.rejects(client.reschedule(id, { delay_ms: 1 }, { revision: 1 }), (err: unknown) => err instanceof FermataError && err.status === 412 && err.code === 'REVISION_MISMATCH');
      await assert.rejects(client.cancel(id, { revision: 1 }), (err: unknown) => err instanceof FermataError && err.code === 'REVISION_MISMATCH');
      assert.deepEqual(await client.cancel(id, { revision: 2 }), { id, state: 'cancelled', revision: 2 });
      const { cancelled } = await client.cancelMany({ queue: `${transport.replace('/', '')}-bulk` });
      assert.ok(cancelled >= 9);
    });

    test('queues, dead letters and redrive', async () => {
      const name = `${transport.replace('/', '')}-fragile`;
      const queue = await client.setQueue(name, { max_attempts: 1, timeout_ms: 2_000 });
      assert.deepEqual([queue.name, queue.max_attempts, queue.paused], [name, 1, false]);
      assert.equal((await client.pauseQueue(name)).paused, true);
      assert.equal((await client.queue(name)).paused, true);
      assert.equal((await client.resumeQueue(name)).paused, false);
      assert.ok((await client.queues()).some((one) => one.name === name));

      const { id } = await client.add({ delay_ms: 0, target: deadTarget, queue: name });
      await until(async () => (await client.get(id)).state === 'dead', 20_000, 'the timer to die');
      const dead = [];
      for await (const one of client.dead({ queue: name })) dead.push(one);
      assert.deepEqual(dead.map((one) => [one.id, one.reason, one.last_error]), [[id, 'attempts_exhausted', 'connection refused']]);
      assert.deepEqual(await client.retryDead(id), { id, state: 'pending' });
      await until(async () => (await client.get(id)).state === 'dead', 20_000, 'the redriven timer to die again');
      assert.deepEqual(await client.discardDead(id), { id, state: 'discarded' });
      await assert.rejects(client.get(id), (err: unknown) => err instanceof FermataError && err.code === 'NOT_FOUND');

      await client.add({ delay_ms: 3_600_000, target, queue: name });
      await assert.rejects(client.deleteQueue(name), (err: unknown) => err instanceof FermataError && err.code === 'QUEUE_NOT_EMPTY' && err.body.pending === 1);
      assert.deepEqual(await client.purgeQueue(name), { cancelled: 1, in_flight: 0 });
      assert.deepEqual(await client.deleteQueue(name), { name, deleted: true });
    });

    test('schedules and stats', async () => {
      const name = `${transport.replace('/', '')}-hourly`;
      const schedule = await client.setSchedule(name, { every_ms: 3_600_000, target, payload: 'tick' });
      assert.deepEqual([schedule.name, schedule.every_ms, schedule.next.length], [name, 3_600_000, 5]);
      assert.equal((await client.schedule(name)).payload, 'tick');
      assert.equal((await client.pauseSchedule(name)).paused, true);
      assert.equal((await client.resumeSchedule(name)).paused, false);
      const names = [];
      for await (const one of client.schedules({ pageSize: 1 })) names.push(one.name);
      assert.ok(names.includes(name));
      assert.deepEqual(await client.deleteSchedule(name), { name, deleted: true });
      const stats = await client.stats();
      assert.ok(stats.pending > 300 && stats.schedules.count === 0);
    });
  });
}
