// `fermata cluster import --data DIR`: a single node's data directory, with pending timers (due
// soon and a day ahead), a configured queue, a paused queue and a schedule whose name hashes
// outside partition 0, imported into a cluster of P = 4 over a real PostgreSQL 15; then one
// `fermata serve --cluster` node, asked with curl:
//
//   - every timer is found by its old 24-character id and by its cluster id (partition 0's
//     prefix), and the ones due are delivered to the sink at their time, not before
//   - the queue configs and the pause hold (they are the cluster's, in fermata_queues)
//   - the schedule is found by name (in its name's partition) and fires, no occurrence twice;
//     deleted through the cluster, the occurrences the import left in partition 0 go with it
//   - a second import is refused (partition 0 holds data), and so is an import while a node is
//     live; an import of a directory a running service holds, of one without fermata data, and
//     into a database whose schema is not this fermata's (here: none)
//
// Short leases (TTL 1 s, renewal 200 ms) keep the node's start to about a second.
//
// In this process, on the same PostgreSQL: a directory whose checkpoint spilled its far timers
// (a spilled run and its keys sidecar, a tombstone) and whose WAL holds records after it, imported
// and opened as partition 0 by an engine over the cluster's log and files (as a node opens it):
// every timer is there, the far ones still spilled, the cancel kept, and a key from before the
// import answers as a duplicate in partition 0. A schedule of partition 0 comes over in its
// schedules file; paused and checkpointed there, it is found paused by the next owner's engine
// (a takeover: the epoch raised, a fresh cache), from the files in PostgreSQL.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import postgres from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { importDataDirectory } from '../../cluster/cluster-import.ts';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Admitted, Engine } from '../../engine/engine.ts';
import { spillLimits } from '../../engine/limits.ts';
import { openPartitionFileSystem } from '../../engine/pg-log/pg-file-system.ts';
import { pgLog } from '../../engine/pg-log/pg-log.ts';
import { clusterIdOf, partitionOfKey } from '../../cluster/partitioning.ts';
import { runCli } from '../helpers/cli-run.ts';
import { curlRequest, json } from '../helpers/curl.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { startService } from '../helpers/service.ts';
import { type Sink, startH1Sink } from '../helpers/sinks.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const partitions = 4;
const secret = 'the-import-secret';
/** How long after its add a due timer fires: past the single node's stop and the import. */
const dueInMs = 20_000;

async function until(what: string, timeoutMs: number, check: () => Promise<boolean> | boolean): Promise<void> {
  const started = performance.now();
  while (!(await check())) {
    assert.ok(performance.now() - started < timeoutMs, `${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('fermata cluster import --data DIR', { skip: skipUnlessTool('initdb') || skipUnlessTool('curl'), timeout: 120_000 }, () => {
  const children = new Set<ChildProcess>();
  const dirs: string[] = [];
  let server: PostgresServer | undefined;
  let sink: Sink | undefined;
  after(async () => {
    for (const child of children) child.kill('SIGKILL');
    await sink?.close();
    await server?.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  function tempDir(name: string): string {
    const dir = mkdtempSync(join(tmpdir(), `fermata-import-${name}-`));
    dirs.push(dir);
    return dir;
  }

  test('a single node\'s timers, queues and schedule carry over to partition 0 (and the schedule to its partition); refusals name why', async () => {
    server = await startPostgres();
    const url = await server.createDatabase('import');
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    await initCluster(admin, partitions);
    sink = await startH1Sink();
    const cli = (...args: string[]) => runCli(['cluster', ...args, '--cluster', url], {}, children);

    // The single node: its timers, queues and schedule.
    const dataDir = tempDir('single');
    const single = await startService(dataDir, (child) => children.add(child));
    children.add(single.child);
    const add = async (body: Record<string, unknown>): Promise<string> => {
      const answer = await curlRequest({ url: `${single.url}/v1/timers`, method: 'POST', body: JSON.stringify(body) });
      assert.equal(answer.status, 201, answer.body.toString());
      return json<{ id: string }>(answer).id;
    };
    const dueAtMs = Date.now() + dueInMs;
    const due = [
      await add({ fire_at: dueAtMs, target: `${sink.url}/due-0`, payload: 'zero' }),
      await add({ fire_at: dueAtMs, target: `${sink.url}/due-1`, payload: 'one', queue: 'mail', key: 'order-1' }),
    ];
    const later = await add({ delay_ms: 86_400_000, target: `${sink.url}/later`, queue: 'held' });
    assert.ok([...due, later].every((id) => id.length === 24));
    assert.equal((await curlRequest({ url: `${single.url}/v1/queues/mail`, method: 'PUT', body: JSON.stringify({ max_attempts: 4, rate_per_s: 40 }) })).status, 200);
    assert.equal((await curlRequest({ url: `${single.url}/v1/queues/held/pause`, method: 'POST' })).status, 200);
    let schedule = 'report-0';
    for (let i = 1; partitionOfKey(schedule, partitions) === 0; i++) schedule = `report-${i}`;
    const put = await curlRequest({ url: `${single.url}/v1/schedules/${schedule}`, method: 'PUT', body: JSON.stringify({ every_ms: 1_000, target: `${sink.url}/schedule`, payload: 'tick' }) });
    assert.equal(put.status, 200, put.body.toString());

    // Refused while the service holds the directory; refused for a directory with no data.
    const empty = tempDir('empty');
    mkdirSync(join(empty, 'other'));
    const noCluster = await server.createDatabase('nocluster');
    const [locked, none, unmigrated] = await Promise.all([
      cli('import', '--data', dataDir),
      cli('import', '--data', empty),
      runCli(['cluster', 'import', '--data', dataDir, '--cluster', noCluster], {}, children),
    ]);
    assert.equal(unmigrated.code, 2, unmigrated.stderr);
    assert.match(unmigrated.stderr, /holds no fermata cluster: create one with `fermata cluster init/);
    assert.equal(locked.code, 2, locked.stderr);
    assert.match(locked.stderr, /locked by a running fermata/);
    assert.equal(none.code, 2, none.stderr);
    assert.match(none.stderr, /holds no fermata data/);

    // The schedule's first occurrence is a second after its PUT: the single node stops once it fired.
    await until('the schedule to fire on the single node', 10_000, () => sink !== undefined && sink.to('/schedule').length > 0);
    single.child.kill('SIGTERM');
    await single.exited;
    const firedBefore = sink.to('/schedule').length;
    assert.equal(sink.to('/due-0').length + sink.to('/due-1').length, 0, 'the single node stopped before the timers were due');

    const imported = await cli('import', '--data', dataDir);
    assert.equal(imported.code, 0, imported.stderr);
    assert.match(imported.stdout, /imported .* as partition 0 of 4/);
    assert.match(imported.stdout, new RegExp(`${schedule} → ${partitionOfKey(schedule, partitions)}`));
    const again = await cli('import', '--data', dataDir);
    assert.equal(again.code, 2, again.stderr);
    assert.match(again.stderr, /partition 0, where the directory goes, holds/);
    const [row] = await admin<{ epoch: string; log_start_seq: string }[]>`SELECT epoch::text AS epoch, log_start_seq::text AS log_start_seq FROM fermata_partitions WHERE partition = 0`;
    assert.equal(row?.epoch, '1', 'the import raised partition 0\'s epoch');
    assert.ok(Number(row?.log_start_seq) > 1, 'partition 0\'s log goes on after the checkpoint');

    // One cluster node takes every partition.
    const nodeDir = tempDir('node');
    const config = join(nodeDir, 'config.json');
    writeFileSync(config, JSON.stringify({ cluster: { node_id: 'node-a', lease_ttl_ms: 1_000, renew_ms: 200 }, dispatch: { threads: 1 } }));
    const node = await startService(nodeDir, (child) => children.add(child), { args: ['--cluster', url, '--config', config], env: { FERMATA_CLUSTER_SECRET: secret } });
    await until('the node owns every partition', 20_000, async () => {
      const answer = await curlRequest({ url: `${node.url}/v1/cluster` });
      return answer.status === 200 && json<{ owned: unknown[] }>(answer).owned.length === partitions;
    });

    for (const id of [...due, later]) {
      for (const asked of [id, clusterIdOf(0, id)]) {
        const answer = await curlRequest({ url: `${node.url}/v1/timers/${asked}` });
        assert.equal(answer.status, 200, `${asked}: ${answer.body.toString()}`);
        // A due one may be on its way already on a slow machine; the sink shows when it went.
        assert.ok((id === later ? ['pending'] : ['pending', 'delivering', 'delivered']).includes(json<{ state: string }>(answer).state), answer.body.toString());
      }
    }
    const mail = json<{ max_attempts: number; rate_per_s: number; paused: boolean }>(await curlRequest({ url: `${node.url}/v1/queues/mail` }));
    assert.deepEqual([mail.max_attempts, mail.rate_per_s, mail.paused], [4, 40, false]);
    const listed = json<{ queues: { name: string; pending: number; paused: boolean }[] }>(await curlRequest({ url: `${node.url}/v1/queues` })).queues;
    // mail's timer is due soon and may be gone already; held's waits a day.
    assert.deepEqual(listed.filter((queue) => queue.name !== 'default').map((queue) => [queue.name, queue.name === 'held' ? queue.pending : '-', queue.paused]), [['held', 1, true], ['mail', '-', false]]);
    const found = await curlRequest({ url: `${node.url}/v1/schedules/${schedule}` });
    assert.equal(found.status, 200, found.body.toString());

    const live = await cli('import', '--data', dataDir);
    assert.equal(live.code, 2, live.stderr);
    assert.match(live.stderr, /node node-a is live/);

    await until('the due timers and the schedule delivered by the cluster', 30_000, () =>
      sink !== undefined && sink.to('/due-0').length === 1 && sink.to('/due-1').length === 1 && sink.to('/schedule').length > firedBefore + 1);
    for (const path of ['/due-0', '/due-1']) {
      const [request] = sink.to(path);
      assert.ok((request?.atMs ?? 0) >= dueAtMs - 5, `${path} delivered at its time, not before`);
    }
    assert.equal(sink.to('/due-1')[0]?.body.toString(), 'one');
    // Its occurrences created before the import are delivered from partition 0, and its own
    // partition goes on after them: none twice.
    const occurrences = sink.to('/schedule').map((request) => String(request.headers['fermata-fire-at']));
    assert.equal(new Set(occurrences).size, occurrences.length, `an occurrence delivered twice: ${occurrences.join(', ')}`);
    assert.equal(sink.to('/later').length, 0);

    // The schedule deleted through the cluster: its partition's occurrences go, and so do the
    // ones the single node had created ahead, left pending in partition 0 (prefix 000).
    const left = async (): Promise<string[]> => {
      const answer = await curlRequest({ url: `${node.url}/v1/timers?state=pending&limit=1000&key_prefix=${encodeURIComponent(`schedule:${schedule}:`)}` });
      assert.equal(answer.status, 200, answer.body.toString());
      return json<{ timers: { id: string }[] }>(answer).timers.map((timer) => timer.id);
    };
    assert.ok((await left()).some((id) => id.startsWith('000')), 'occurrences created ahead on the single node are pending in partition 0');
    assert.equal((await curlRequest({ url: `${node.url}/v1/schedules/${schedule}`, method: 'DELETE' })).status, 200);
    assert.deepEqual(await left(), []);
    await admin.end();
  });

  test('spilled runs, their keys, tombstones and the WAL after the checkpoint come over: a node\'s engine over partition 0 has every timer', async () => {
    assert.ok(server !== undefined, 'the first test started PostgreSQL');
    const url = await server.createDatabase('spilled');
    const sql = postgres(url, { max: 2, onnotice: () => {} });
    try {
      await initCluster(sql, 2);
      const dataDir = tempDir('spilled');
      const target = 'https://a.example/hook';
      const width = spillLimits.bucketWidthMs;
      const watermark = Math.ceil((Date.now() + 3 * width) / width) * width;
      const idsOf = (admitted: Admitted): string[] => Array.from({ length: admitted.rows }, (_, row) => admitted.idOf(row));
      const single = await Engine.open({ dataDir });
      const near = idsOf(await single.admit(batchFromSpecs(Array.from({ length: 20 }, (_, i) => ({ fireAtMs: Date.now() + 3_600_000 + i, target, payload: `near ${i}` })))));
      const far = idsOf(await single.admit(batchFromSpecs(Array.from({ length: 30 }, (_, i) => ({ fireAtMs: watermark + width + i * 1000, target, payload: `far ${i}`, key: `far-${i}` })))));
      assert.equal((await single.checkpoint(watermark)).spilledRows, 30);
      assert.equal(await single.cancel(far[3] as string), 'cancelled');
      const tail = idsOf(await single.admit(batchFromSpecs([{ fireAtMs: Date.now() + 7_200_000, target, payload: 'after the checkpoint' }])));
      // A schedule of partition 0, in the checkpoint's schedules file: it comes over as that file.
      let kept = 'kept-0';
      for (let i = 1; partitionOfKey(kept, 2) !== 0; i++) kept = `kept-${i}`;
      await single.putSchedule(kept, { everyMs: 3_600_000, startAtMs: Date.now() + 3_600_000, target, queue: 'default', payload: new TextEncoder().encode('tick'), headers: '' });
      await single.checkpoint(watermark);
      await single.close();

      const report = await importDataDirectory(sql, dataDir);
      assert.equal(report.pending, 51, 'the timers and the schedule\'s next occurrence');
      assert.equal(report.schedulesKept, 1);
      const [row] = await sql<{ epoch: string }[]>`UPDATE fermata_partitions SET epoch = epoch + 1, owner = 'test' WHERE partition = 0 RETURNING epoch::text AS epoch`;
      const epoch = Number(row?.epoch);
      const cacheDir = join(tempDir('cache'), 'p0');
      const fs = await openPartitionFileSystem({ sql, partition: 0, epoch, cacheDir });
      const engine = await Engine.open({ dataDir: cacheDir, fs, idPrefix: clusterIdOf(0, ''), openLog: pgLog({ sql, partition: 0, epoch }) });
      try {
        assert.equal(engine.stats().pending, 51);
        assert.equal(engine.schedule(kept)?.definition.everyMs, 3_600_000, 'the schedule came over in its schedules file');
        for (const id of [...near, ...tail]) assert.equal((await engine.lookup(id))?.state, 'pending', id);
        for (const [i, id] of far.entries()) {
          const view = await engine.lookup(id);
          assert.equal(view?.state, i === 3 ? 'cancelled' : 'pending', `far ${i}`);
          assert.equal(view?.fireAtMs, watermark + width + i * 1000);
        }
        assert.equal(engine.get(far[0] as string), undefined, 'the far timers are still spilled');
        const again = await engine.admit(batchFromSpecs([{ fireAtMs: watermark + width + 7000, target, payload: 'far 7', key: 'far-7' }]));
        assert.equal(again.duplicates, 1, 'a key of a spilled timer answers as a duplicate');
        assert.equal(again.idOf(0), far[7]);
        // The log goes on after the checkpoint: a new id is none of the imported ones.
        const fresh = idsOf(await engine.admit(batchFromSpecs([{ fireAtMs: Date.now() + 60_000, target, payload: 'new' }])));
        assert.ok(![...near, ...far, ...tail].includes(fresh[0] as string));
        // A checkpoint of the partition (its schedules file in PostgreSQL), then a takeover restores it.
        await engine.setSchedulePaused(kept, true);
        await engine.checkpoint(watermark);
      } finally {
        await engine.close();
      }
      const stored = await sql<{ name: string }[]>`SELECT DISTINCT name FROM fermata_checkpoint_files WHERE partition = 0 AND name LIKE 'spill/schedules-%'`;
      assert.equal(stored.length, 1, 'the partition\'s schedules file is among its checkpoint files');
      const [next] = await sql<{ epoch: string }[]>`UPDATE fermata_partitions SET epoch = epoch + 1, owner = 'test-2' WHERE partition = 0 RETURNING epoch::text AS epoch`;
      const ownerCache = join(tempDir('cache'), 'p0');
      const takeover = await openPartitionFileSystem({ sql, partition: 0, epoch: Number(next?.epoch), cacheDir: ownerCache });
      const owner = await Engine.open({ dataDir: ownerCache, fs: takeover, idPrefix: clusterIdOf(0, ''), openLog: pgLog({ sql, partition: 0, epoch: Number(next?.epoch) }) });
      try {
        assert.equal(owner.schedule(kept)?.paused, true, 'the schedule, paused, survived the takeover in its schedules file');
      } finally {
        await owner.close();
      }
    } finally {
      await sql.end();
    }
  });
});
