// The partition file system in PostgreSQL (engine/pg-log/pg-file-system.ts) against a real
// PostgreSQL 15: the FileSystem contract the simulated and real disks pass; what a taker with an
// empty cache reads (what was datasynced and renamed, over several chunks, nothing only
// written); the fence (a deposed owner's every write refused, one held up behind the takeover
// too, the rows unchanged); the cache directory's guard; EIO with the database out of reach; and
// an engine over PgLog and this file system whose checkpoint a new owner on another node opens.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres, { type Sql } from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Admitted, type Clock, Engine } from '../../engine/engine.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import type { FileSystem } from '../../engine/fs/file-system.ts';
import { cacheMarkerName, chunkBytes, openPartitionFileSystem } from '../../engine/pg-log/pg-file-system.ts';
import { pgLog } from '../../engine/pg-log/pg-log.ts';
import { fileSystemContract } from '../helpers/file-system-contract.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { startTcpCutter } from '../helpers/tcp-cutter.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const noPostgres = skipUnlessTool('initdb');
const partitions = 64;
const hour = 3600_000;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);

const fenced = (err: unknown): boolean => isFermataError(err, errorCodes.logFenced);

/** Byte i is (i × 7 + seed) mod 251 + 1: never zero, so a lost or misplaced byte shows. */
function pattern(length: number, seed: number): Uint8Array {
  return Uint8Array.from({ length }, (_, i) => ((i * 7 + seed) % 251) + 1);
}

describe('PostgreSQL partition file system', { skip: noPostgres, timeout: 300_000 }, () => {
  let server: PostgresServer;
  let sql: Sql;
  let nextPartition = 0;
  const top = mkdtempSync(join(tmpdir(), 'fermata-pgfs-'));
  let caches = 0;
  before(async () => {
    server = await startPostgres();
    sql = postgres(await server.createDatabase('pgfs'), { max: 6, onnotice: () => {} });
    await initCluster(sql, partitions);
  });
  after(async () => {
    await sql?.end({ timeout: 5 });
    await server?.stop();
    rmSync(top, { recursive: true, force: true });
  });

  /** A fresh, absent cache directory, as a node that never held the partition has. */
  const newCacheDir = (): string => join(top, `cache-${++caches}`);

  /** Takes `partition` over: its epoch + 1, as a new owner's acquisition does. */
  async function takeOver(partition: number): Promise<number> {
    const [row] = await sql<{ epoch: string }[]>`UPDATE fermata_partitions SET epoch = epoch + 1, owner = 'test' WHERE partition = ${partition} RETURNING epoch`;
    return Number(row?.epoch);
  }

  /** A partition no other test uses, taken at epoch 1. */
  async function newPartition(): Promise<{ partition: number; epoch: number }> {
    const partition = nextPartition++;
    return { partition, epoch: await takeOver(partition) };
  }

  /** The stored rows of a partition, as text, to compare before and after. */
  async function storedImage(partition: number): Promise<string> {
    const rows = await sql<{ name: string; chunk: number; digest: string }[]>`
      SELECT name, chunk, md5(body) AS digest FROM fermata_checkpoint_files WHERE partition = ${partition} ORDER BY name, chunk`;
    return rows.map((row) => `${row.name}#${row.chunk}:${row.digest}`).join('\n');
  }

  async function write(fs: FileSystem, path: string, bytes: Uint8Array, sync = true): Promise<void> {
    const handle = await fs.open(path, 'create');
    await handle.writev([bytes], 0);
    if (sync) await handle.datasync();
    await handle.close();
  }

  describe('the FileSystem contract', () => {
    fileSystemContract(async () => {
      const { partition, epoch } = await newPartition();
      const cacheDir = newCacheDir();
      return { fs: await openPartitionFileSystem({ sql, partition, epoch, cacheDir }), root: cacheDir };
    });
  });

  test('a taker with an empty cache reads what was datasynced and renamed, over several chunks, and nothing only written', async () => {
    const { partition, epoch } = await newPartition();
    const cacheDir = newCacheDir();
    const fs = await openPartitionFileSystem({ sql, partition, epoch, cacheDir });
    const spill = join(cacheDir, 'spill');
    await fs.mkdirp(spill);
    // A run of 2.5 chunks, then bytes changed inside its second chunk and the file cut: each datasync uploads what changed.
    const run = pattern(2.5 * chunkBytes, 1);
    const handle = await fs.open(join(spill, 'run-1.arrow'), 'create');
    await handle.writev([run.subarray(0, chunkBytes + 10)], 0);
    await handle.datasync();
    await handle.writev([run.subarray(chunkBytes + 10)], chunkBytes + 10);
    await handle.datasync();
    run.fill(0xee, chunkBytes + 100, chunkBytes + 200);
    await handle.writev([run.subarray(chunkBytes + 100, chunkBytes + 200)], chunkBytes + 100);
    await handle.truncate(2 * chunkBytes + 3);
    await handle.datasync();
    await handle.close();
    const chunks = await sql<{ chunk: number; bytes: number }[]>`
      SELECT chunk, octet_length(body) AS bytes FROM fermata_checkpoint_files WHERE partition = ${partition} AND name = 'spill/run-1.arrow' ORDER BY chunk`;
    assert.deepEqual(chunks.map((row) => [row.chunk, row.bytes]), [[0, chunkBytes], [1, chunkBytes], [2, 3]]);
    // The manifest's way in: a temporary file, datasynced, renamed over the old one.
    await write(fs, join(spill, 'MANIFEST'), pattern(10, 2));
    await write(fs, join(spill, 'MANIFEST.tmp'), pattern(300, 3));
    await fs.rename(join(spill, 'MANIFEST.tmp'), join(spill, 'MANIFEST'));
    await fs.syncDir(spill);
    // Written, never datasynced: its name is stored, its bytes are not.
    await write(fs, join(spill, 'run-2.arrow'), pattern(50, 4), false);
    await write(fs, join(spill, 'gone.keys'), pattern(5, 5));
    await fs.unlink(join(spill, 'gone.keys'));

    const takerDir = newCacheDir();
    const taker = await openPartitionFileSystem({ sql, partition, epoch: await takeOver(partition), cacheDir: takerDir });
    const takerSpill = join(takerDir, 'spill');
    assert.deepEqual((await taker.list(takerSpill)).sort(), ['MANIFEST', 'run-1.arrow', 'run-2.arrow']);
    assert.deepEqual(await taker.readFile(join(takerSpill, 'run-1.arrow')), run.subarray(0, 2 * chunkBytes + 3));
    assert.deepEqual(await taker.readFile(join(takerSpill, 'MANIFEST')), pattern(300, 3));
    assert.equal((await taker.readFile(join(takerSpill, 'run-2.arrow'))).length, 0);
    const reader = await taker.open(join(takerSpill, 'run-1.arrow'), 'read');
    const into = new Uint8Array(200);
    assert.equal(await reader.read(into, chunkBytes + 50), 200);
    assert.deepEqual(into, run.subarray(chunkBytes + 50, chunkBytes + 250));
    await reader.close();
  });

  test("a deposed owner's every write is refused with LOG_FENCED after the takeover, and changes nothing", async () => {
    const { partition, epoch } = await newPartition();
    const cacheDir = newCacheDir();
    const old = await openPartitionFileSystem({ sql, partition, epoch, cacheDir });
    const spill = join(cacheDir, 'spill');
    await old.mkdirp(spill);
    await write(old, join(spill, 'MANIFEST'), pattern(100, 1));
    const open = await old.open(join(spill, 'run-1.arrow'), 'create');
    await open.writev([pattern(10, 2)], 0);

    // The new owner takes over and writes its own manifest.
    const newEpoch = await takeOver(partition);
    const takerDir = newCacheDir();
    const taker = await openPartitionFileSystem({ sql, partition, epoch: newEpoch, cacheDir: takerDir });
    await write(taker, join(takerDir, 'spill', 'MANIFEST.tmp'), pattern(100, 9));
    await taker.rename(join(takerDir, 'spill', 'MANIFEST.tmp'), join(takerDir, 'spill', 'MANIFEST'));
    const image = await storedImage(partition);

    await assert.rejects(open.datasync(), fenced);
    await assert.rejects(open.writev([pattern(1, 1)], 0), fenced, 'once fenced, refused without asking the database');
    await assert.rejects(old.open(join(spill, 'MANIFEST.tmp'), 'create'), fenced);
    await assert.rejects(old.rename(join(spill, 'MANIFEST'), join(spill, 'MANIFEST.old')), fenced);
    await assert.rejects(old.unlink(join(spill, 'MANIFEST')), fenced);
    await assert.rejects(old.lockDir(cacheDir), fenced);
    await assert.rejects(old.syncDir(spill), fenced);
    await assert.rejects(openPartitionFileSystem({ sql, partition, epoch, cacheDir: newCacheDir() }), fenced);
    assert.equal(await storedImage(partition), image);
    assert.deepEqual(await taker.readFile(join(takerDir, 'spill', 'MANIFEST')), pattern(100, 9));
    await open.close();
  });

  test("a deposed owner's rename held up behind the takeover's transaction lands nothing after it", async () => {
    const { partition, epoch } = await newPartition();
    const cacheDir = newCacheDir();
    const old = await openPartitionFileSystem({ sql, partition, epoch, cacheDir });
    await write(old, join(cacheDir, 'MANIFEST.tmp'), pattern(64, 1));
    const image = await storedImage(partition);
    const takeover = Promise.withResolvers<void>();
    const holding = Promise.withResolvers<void>();
    const takeoverDone = sql.begin(async (tx) => {
      await tx`UPDATE fermata_partitions SET epoch = epoch + 1 WHERE partition = ${partition}`;
      holding.resolve();
      await takeover.promise;
    });
    await holding.promise;
    // Its refusal is awaited from the start: it comes while the test awaits the takeover's commit.
    const refused = assert.rejects(old.rename(join(cacheDir, 'MANIFEST.tmp'), join(cacheDir, 'MANIFEST')), fenced);
    // The rename's transaction waits on the partition's row until the takeover commits.
    let waited = false;
    for (let i = 0; i < 250 && !waited; i++) {
      const [row] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`;
      waited = (row?.n ?? 0) > 0;
      if (!waited) await sleep(20);
    }
    assert.ok(waited, 'the rename waited for the takeover');
    takeover.resolve();
    await takeoverDone;
    await refused;
    assert.equal(await storedImage(partition), image);
  });

  test("a lease renewal is not held up behind an upload: the partition's row is locked only for the commit", async () => {
    const { partition, epoch } = await newPartition();
    const cacheDir = newCacheDir();
    const fs = await openPartitionFileSystem({ sql, partition, epoch, cacheDir });
    const handle = await fs.open(join(cacheDir, 'run-1.arrow'), 'create');
    await handle.writev([pattern(3 * chunkBytes, 1)], 0);
    // Each chunk this partition stores takes a second, as a slow upload would.
    await sql.unsafe(`
      CREATE FUNCTION slow_chunk() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.partition = ${partition} THEN PERFORM pg_sleep(1); END IF; RETURN NEW; END $$;
      CREATE TRIGGER slow_chunk BEFORE INSERT OR UPDATE ON fermata_checkpoint_files FOR EACH ROW EXECUTE FUNCTION slow_chunk()`);
    try {
      const upload = handle.datasync();
      let sleeping = false;
      for (let i = 0; i < 250 && !sleeping; i++) {
        const [row] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()`;
        sleeping = (row?.n ?? 0) > 0;
        if (!sleeping) await sleep(20);
      }
      assert.ok(sleeping, 'the upload is under way');
      const renewed = await sql.begin(async (tx) => {
        await tx`SET LOCAL lock_timeout = '300ms'`;
        return tx`UPDATE fermata_partitions SET lease_until = now() + interval '10 seconds' WHERE partition = ${partition} AND epoch = ${epoch} RETURNING partition`;
      });
      assert.equal(renewed.length, 1);
      await upload;
    } finally {
      await sql.unsafe('DROP TRIGGER slow_chunk ON fermata_checkpoint_files; DROP FUNCTION slow_chunk()');
    }
    await handle.close();
    const [stored] = await sql<{ bytes: number }[]>`SELECT sum(octet_length(body))::int AS bytes FROM fermata_checkpoint_files WHERE partition = ${partition}`;
    assert.equal(stored?.bytes, 3 * chunkBytes);
  });

  test('the cache directory: a foreign non-empty one is refused and left alone; a stale cache is emptied, its copies never served', async () => {
    const { partition, epoch } = await newPartition();
    const foreign = newCacheDir();
    mkdirSync(foreign, { recursive: true });
    writeFileSync(join(foreign, 'node-id'), 'keep me');
    await assert.rejects(openPartitionFileSystem({ sql, partition, epoch, cacheDir: foreign }), { code: 'ENOTEMPTY' });
    assert.deepEqual(readdirSync(foreign), ['node-id']);

    const cacheDir = newCacheDir();
    const first = await openPartitionFileSystem({ sql, partition, epoch, cacheDir });
    await write(first, join(cacheDir, 'MANIFEST'), pattern(20, 1));
    // Another owner rewrites the manifest; the first node takes the partition back over the same cache directory.
    const otherDir = newCacheDir();
    const other = await openPartitionFileSystem({ sql, partition, epoch: await takeOver(partition), cacheDir: otherDir });
    await other.unlink(join(otherDir, 'MANIFEST'));
    await write(other, join(otherDir, 'MANIFEST'), pattern(20, 7));
    const back = await openPartitionFileSystem({ sql, partition, epoch: await takeOver(partition), cacheDir });
    assert.deepEqual(await back.readFile(join(cacheDir, 'MANIFEST')), pattern(20, 7));
    assert.deepEqual(await back.list(cacheDir), ['MANIFEST'], 'the marker is not a file of the engine');
    assert.ok(readdirSync(cacheDir).includes(cacheMarkerName));
  });

  test('the database out of reach: EIO and nothing stored; the datasync goes through once it is back', async () => {
    const { partition, epoch } = await newPartition();
    const cacheDir = newCacheDir();
    const fs = await openPartitionFileSystem({ sql, partition, epoch, cacheDir });
    const handle = await fs.open(join(cacheDir, 'run-1.arrow'), 'create');
    await handle.writev([pattern(100, 1)], 0);
    const image = await storedImage(partition);
    await server.halt();
    try {
      await assert.rejects(handle.datasync(), (err: unknown) => {
        assert.equal((err as { code?: unknown }).code, 'EIO');
        assert.match((err as Error).message, /the cluster database failed .*, fdatasync 'run-1.arrow'/);
        return true;
      });
      await assert.rejects(fs.rename(join(cacheDir, 'run-1.arrow'), join(cacheDir, 'run-2.arrow')), { code: 'EIO' });
    } finally {
      await server.start();
    }
    assert.equal(await storedImage(partition), image);
    assert.deepEqual(await fs.list(cacheDir), ['run-1.arrow']);
    await handle.datasync();
    await handle.close();
    const takerDir = newCacheDir();
    const taker = await openPartitionFileSystem({ sql, partition, epoch: await takeOver(partition), cacheDir: takerDir });
    assert.deepEqual(await taker.readFile(join(takerDir, 'run-1.arrow')), pattern(100, 1));
  });

  test('a connection lost in the middle of an upload: EIO, and the next datasync stores the whole of it', async () => {
    const { partition, epoch } = await newPartition();
    const cutter = await startTcpCutter(server.port);
    const url = new URL(server.urlOf('pgfs'));
    url.port = String(cutter.port);
    const through = postgres(url.toString(), { max: 2, onnotice: () => {} });
    try {
      const cacheDir = newCacheDir();
      const fs = await openPartitionFileSystem({ sql: through, partition, epoch, cacheDir });
      const handle = await fs.open(join(cacheDir, 'run-1.arrow'), 'create');
      const bytes = pattern(3 * chunkBytes + 5, 4);
      await handle.writev([bytes], 0);
      const cut = cutter.cutAfterClientSends('PGCOPY');
      await assert.rejects(handle.datasync(), { code: 'EIO' });
      await cut;
      await handle.datasync();
      await handle.close();
      const takerDir = newCacheDir();
      const taker = await openPartitionFileSystem({ sql, partition, epoch: await takeOver(partition), cacheDir: takerDir });
      assert.deepEqual(await taker.readFile(join(takerDir, 'run-1.arrow')), bytes);
    } finally {
      await through.end({ timeout: 1 });
      await cutter.close();
    }
  });

  test('an engine over PgLog and this file system checkpoints into PostgreSQL; a new owner with an empty cache has every timer', async () => {
    const { partition, epoch } = await newPartition();
    let now = t0;
    const clock: Clock = { now: () => now };
    const target = 'https://a.example/hook';
    const open = async (ownerEpoch: number, cacheDir: string): Promise<{ engine: Engine; fs: FileSystem }> => {
      const fs = await openPartitionFileSystem({ sql, partition, epoch: ownerEpoch, cacheDir });
      const engine = await Engine.open({ dataDir: cacheDir, fs, clock, openLog: pgLog({ sql, partition, epoch: ownerEpoch }) });
      return { engine, fs };
    };
    const idsOf = (admitted: Admitted): string[] => Array.from({ length: admitted.rows }, (_, row) => admitted.idOf(row));
    const firstDir = newCacheDir();
    const { engine, fs: firstFs } = await open(epoch, firstDir);
    const near = idsOf(await engine.admit(batchFromSpecs(Array.from({ length: 40 }, (_, i) => ({ fireAtMs: t0 + 60_000 + i, target, payload: `near ${i}` })))));
    const far = idsOf(await engine.admit(batchFromSpecs(Array.from({ length: 60 }, (_, i) => ({ fireAtMs: t0 + 10 * hour + i * 1000, target, payload: `far ${i}` })))));
    const cancelled = far[5] as string;
    const report = await engine.checkpoint(t0 + 3 * hour);
    assert.equal(report.spilledRows, 60);
    assert.equal(await engine.cancel(cancelled), 'cancelled');
    const tail = idsOf(await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 120_000, target, payload: 'after the checkpoint' }])));
    const [log] = await sql<{ rows: number; start: string }[]>`
      SELECT (SELECT count(*)::int FROM fermata_log WHERE partition = ${partition}) AS rows, log_start_seq AS start FROM fermata_partitions WHERE partition = ${partition}`;
    assert.equal(log?.rows, 2, 'the log holds only what came after the checkpoint: the cancel and the add');
    assert.ok(Number(log?.start) > 1, 'and its start was raised past what the checkpoint covers');
    const stored = await sql<{ name: string }[]>`SELECT DISTINCT name FROM fermata_checkpoint_files WHERE partition = ${partition} ORDER BY name`;
    assert.ok(stored.some((row) => row.name === 'spill/MANIFEST'));
    assert.ok(stored.filter((row) => /^spill\/run-\d+\.arrow$/.test(row.name)).length >= 2, stored.map((row) => row.name).join());
    await engine.close();

    // Another node: an empty cache directory, the next epoch.
    const { engine: taker } = await open(await takeOver(partition), newCacheDir());
    try {
      assert.equal(taker.stats().pending, 100);
      for (const [i, id] of near.entries()) assert.equal((await taker.lookup(id))?.fireAtMs, t0 + 60_000 + i);
      for (const [i, id] of far.entries()) {
        const view = await taker.lookup(id);
        assert.equal(view?.state, id === cancelled ? 'cancelled' : 'pending', `far ${i}`);
        assert.equal(view?.fireAtMs, t0 + 10 * hour + i * 1000);
      }
      assert.equal(taker.get(far[0] as string), undefined, 'the far timers are still spilled');
      assert.equal((await taker.lookup(tail[0] as string))?.target, target);
      now = t0 + 10 * hour + 1000;
      // The deposed owner's file system writes nothing more.
      await assert.rejects(firstFs.unlink(join(firstDir, 'spill', 'MANIFEST')), fenced);
      const report2 = await taker.checkpoint();
      assert.ok(report2.residentRows > 0);
    } finally {
      await taker.close();
    }
  });
});
