// `fermata cluster import --data DIR`: a single-node data directory moved into a cluster as its
// partition 0, so that the ids its clients hold (24 characters, which name partition 0) still
// find their timers. docs/cluster.md, "Moving a single-node directory into a cluster".
//
//   DIR ─Engine.open (the WAL replays)─► checkpoint (everything in MANIFEST and its runs) ─► close
//       ─► ONE transaction on the cluster database:
//            partition 0: its checkpoint files (spill/MANIFEST and the runs and key sidecars it
//            names, stored as a node's checkpoint of partition 0 stores them: pg-file-system.ts),
//            log_start_seq = the checkpoint's sequence + 1, epoch + 1 (fencing any stale owner)
//            fermata_queues: each queue the directory configured or paused, as a PUT would
//            partition p ≠ 0: the schedules whose name hashes to p, as SCHEDULE records of its log
//
// Schedules belong to the partition of their name's hash in a cluster, so one that hashes
// elsewhere leaves partition 0's manifest (its occurrences already created stay there, pending,
// with their ids) and is put into its partition's log with its mark, so that its partition goes
// on creating occurrences after the last one partition 0 holds, none twice. Keyed timers stay in
// partition 0 whatever their key's hash: an add through the cluster with the same key goes to
// the key's partition and is not a duplicate of the imported one (a documented limitation).
//
// Refused (ImportRefused, naming what): the directory locked by a running service, or holding
// no fermata data; the schema not current; a live node; partition 0, or a partition receiving a
// schedule, with log rows or checkpoint files already. The directory is left as it was but for
// the checkpoint taken, which a single node reads as its own. CLI thread; no state.
import { existsSync } from 'node:fs';
import { join, posix } from 'node:path';
import type { Sql, TransactionSql } from 'postgres';
import { type CheckpointReport, Engine } from '../engine/engine.ts';
import { errorCodes, FermataError } from '../engine/errors.ts';
import { nodeFileSystem } from '../engine/fs/node-file-system.ts';
import { chunkBytes } from '../engine/pg-log/pg-file-system.ts';
import { defaultQueueConfig, type QueueConfig, storedConfig } from '../engine/queues.ts';
import { recordType } from '../engine/records.ts';
import { definitionFromJson, encodeScheduleChange } from '../engine/schedules/schedule-records.ts';
import { type ManifestSchedule, manifestSchedules } from '../engine/schedules/schedule-checkpoint.ts';
import { parseScheduleFileName, scheduleFileIds } from '../engine/schedules/schedule-file.ts';
import { parseRunFileName } from '../engine/spill/format.ts';
import { decodeManifest, encodeManifest, type Manifest } from '../engine/spill/manifest.ts';
import { defaultLeaseSettings } from './leases.ts';
import { partitionOfKey } from './partitioning.ts';
import { requireCurrentSchema } from './schema/migrate.ts';

/** An import the cluster or the directory does not allow; nothing was written to the cluster. */
export class ImportRefused extends Error {}

export interface ImportReport {
  readonly partitions: number;
  /** The log sequence partition 0's checkpoint covers: its log goes on at the next one. */
  readonly checkpointSeq: number;
  /** Partition 0's new epoch. */
  readonly epoch: number;
  readonly pending: number;
  readonly files: number;
  readonly bytes: number;
  readonly queues: number;
  /** Schedules moved to the partition of their name's hash, by name. */
  readonly schedulesMoved: Readonly<Record<string, number>>;
  readonly schedulesKept: number;
}

interface ImportQueue {
  readonly name: string;
  readonly config: Partial<QueueConfig> | null;
  readonly paused: boolean;
}

/** What a checkpoint of the directory gave: its files (names relative to the directory) and what the engine held. */
interface DirectorySnapshot {
  readonly manifest: Manifest;
  readonly files: ReadonlyMap<string, Uint8Array>;
  /** Every schedule the manifest holds (in its schedules files). */
  readonly schedules: readonly ManifestSchedule[];
  readonly queues: readonly ImportQueue[];
  readonly pending: number;
}

const manifestName = 'spill/MANIFEST';

export async function importDataDirectory(sql: Sql, dataDir: string): Promise<ImportReport> {
  await requireCurrentSchema(sql).catch((err: unknown) => {
    throw err instanceof FermataError ? new ImportRefused(err.message) : err;
  });
  const [cluster] = await sql<{ partitions: number }[]>`SELECT partitions FROM fermata_cluster`;
  if (cluster === undefined) throw new ImportRefused('the database holds no fermata cluster: create one with `fermata cluster init --partitions P`');
  // Checked here first so that a refused import leaves the directory untouched; checked again in the transaction.
  await refuseLiveNodes(sql);
  const snapshot = await checkpointDirectory(dataDir);
  const { partitions } = cluster;
  const { manifest, moved, kept } = splitSchedules(snapshot.manifest, snapshot.schedules, partitions);
  const files = new Map(snapshot.files);
  // Partition 0's schedules went inline when some moved: its schedules files are not named any more.
  if (manifest.scheduleFile === undefined) for (const name of files.keys()) if (parseScheduleFileName(posix.basename(name)) !== undefined) files.delete(name);
  files.set(manifestName, encodeManifest(manifest));

  const epoch = await sql.begin(async (tx) => {
    const touched = [0, ...moved.keys()].sort((a, b) => a - b);
    const rows = await tx<{ partition: number; epoch: string; log_start_seq: string; log_rows: number; files: number }[]>`
      SELECT partition, epoch::text AS epoch, log_start_seq::text AS log_start_seq,
        (SELECT count(*)::int FROM fermata_log l WHERE l.partition = p.partition) AS log_rows,
        (SELECT count(*)::int FROM fermata_checkpoint_files f WHERE f.partition = p.partition) AS files
      FROM fermata_partitions p WHERE partition IN ${tx(touched)} ORDER BY partition FOR UPDATE`;
    await refuseLiveNodes(tx);
    for (const row of rows) {
      if (row.log_rows > 0 || row.files > 0) {
        const why = row.partition === 0 ? 'partition 0, where the directory goes,' : `partition ${row.partition}, where schedule ${[...(moved.get(row.partition) ?? [])].map((s) => JSON.stringify(s.name)).join(', ')} belongs,`;
        throw new ImportRefused(`${why} holds ${row.log_rows} log rows and ${row.files} checkpoint file rows already: an import goes into partitions nothing was written to`);
      }
    }
    const first = rows[0];
    if (first?.partition !== 0) throw new Error('the cluster has no partition 0');
    if (BigInt(first.log_start_seq) > manifest.checkpointSeq + 1) {
      throw new ImportRefused(`partition 0's log starts at sequence ${first.log_start_seq}, past the directory's ${manifest.checkpointSeq + 1}: it was written to before`);
    }
    const [raised] = await tx<{ epoch: string }[]>`
      UPDATE fermata_partitions SET epoch = epoch + 1, owner = NULL, owner_address = NULL, lease_until = NULL,
        log_start_seq = ${manifest.checkpointSeq + 1}
      WHERE partition = 0 RETURNING epoch::text AS epoch`;
    for (const [name, body] of files) await insertFile(tx, 0, name, body);
    for (const queue of snapshot.queues) {
      await tx`
        INSERT INTO fermata_queues (name, config, paused) VALUES (${queue.name}, ${queue.config === null ? null : tx.json(queue.config as Record<string, never>)}, ${queue.paused})
        ON CONFLICT (name) DO UPDATE SET config = EXCLUDED.config, paused = EXCLUDED.paused, deleted = false,
          revision = nextval('fermata_queue_revision'), updated_at = now()`;
    }
    for (const [partition, schedules] of moved) {
      const row = rows.find((r) => r.partition === partition);
      await appendSchedules(tx, partition, Number(row?.log_start_seq ?? 1), schedules);
    }
    return Number(raised?.epoch);
  });
  let bytes = 0;
  for (const body of files.values()) bytes += body.length;
  return {
    partitions,
    checkpointSeq: manifest.checkpointSeq,
    epoch,
    pending: snapshot.pending,
    files: files.size,
    bytes,
    queues: snapshot.queues.length,
    schedulesMoved: Object.fromEntries([...moved].flatMap(([partition, schedules]) => schedules.map((s) => [s.name, partition]))),
    schedulesKept: kept,
  };
}

/**
 * Partition 0's manifest without the schedules whose name hashes elsewhere, and those schedules
 * by the partition they move to. When none moves the manifest is as the checkpoint wrote it;
 * otherwise partition 0's schedules go inline, as a manifest from before schedules files held
 * them (read as such; its first checkpoint writes them into a schedules file). Owed cancels
 * stay: the occurrences they cancel are partition 0's (and the open before the checkpoint
 * settled them already).
 */
function splitSchedules(all: Manifest, schedules: readonly ManifestSchedule[], partitions: number): { manifest: Manifest; moved: Map<number, ManifestSchedule[]>; kept: number } {
  const moved = new Map<number, ManifestSchedule[]>();
  const kept: ManifestSchedule[] = [];
  for (const schedule of schedules) {
    const partition = partitionOfKey(schedule.name, partitions);
    if (partition === 0) kept.push(schedule);
    else moved.set(partition, [...(moved.get(partition) ?? []), schedule]);
  }
  if (moved.size === 0) return { manifest: all, moved, kept: kept.length };
  const manifest: { -readonly [K in keyof Manifest]: Manifest[K] } = { ...all };
  delete manifest.scheduleFile;
  // Left out when there are none, as a checkpoint leaves them out.
  delete manifest.schedules;
  if (kept.length > 0) manifest.schedules = kept;
  return { manifest, moved, kept: kept.length };
}

async function refuseLiveNodes(sql: Sql | TransactionSql): Promise<void> {
  const live = await sql<{ node_id: string }[]>`
    SELECT node_id FROM fermata_nodes
    WHERE state = 'live' AND heartbeat_at > clock_timestamp() - make_interval(secs => ${defaultLeaseSettings.leaseTtlMs / 1000})
    ORDER BY node_id`;
  if (live.length > 0) throw new ImportRefused(`node ${live.map((n) => n.node_id).join(', ')} is live in the cluster: stop every node before an import`);
}

/** Opens the directory as the service would, checkpoints it, closes it; again if anything was logged after the checkpoint (a schedule's occurrence). */
async function checkpointDirectory(dataDir: string): Promise<DirectorySnapshot> {
  if (!existsSync(join(dataDir, 'wal')) && !existsSync(join(dataDir, manifestName))) {
    throw new ImportRefused(`${dataDir} holds no fermata data (no wal/ and no spill/MANIFEST)`);
  }
  for (let attempt = 1; ; attempt++) {
    let engine: Engine;
    try {
      engine = await Engine.open({ dataDir });
    } catch (err) {
      if (err instanceof FermataError && err.code === errorCodes.dataDirLocked) throw new ImportRefused(`${dataDir} is locked by a running fermata: stop it first (${err.message})`);
      throw err;
    }
    let report: CheckpointReport;
    let queues: ImportQueue[];
    let pending: number;
    try {
      report = await engine.checkpoint();
      const defaults = JSON.stringify(storedConfig(defaultQueueConfig));
      queues = engine.queues().flatMap((view) => {
        const config = storedConfig(view.config);
        const configured = JSON.stringify(config) !== defaults;
        return configured || view.paused ? [{ name: view.name, config: configured ? config : null, paused: view.paused }] : [];
      });
      pending = engine.stats().pending;
    } finally {
      await engine.close();
    }
    if (engine.log.lastSeq === report.coveredSeq) {
      return { ...(await readCheckpointFiles(dataDir)), queues, pending };
    }
    if (attempt === 3) throw new Error(`${dataDir} kept logging records after each checkpoint`);
  }
}

async function readCheckpointFiles(dataDir: string): Promise<{ manifest: Manifest; files: Map<string, Uint8Array>; schedules: ManifestSchedule[] }> {
  const manifest = decodeManifest(await nodeFileSystem.readFile(join(dataDir, manifestName)));
  const named = new Set([manifest.residentRun.runId, ...manifest.spilledRuns.map((run) => run.runId), ...scheduleFileIds(manifest.scheduleFile)]);
  const files = new Map<string, Uint8Array>();
  for (const name of (await nodeFileSystem.list(join(dataDir, 'spill'))).sort()) {
    const runId = parseRunFileName(name) ?? parseScheduleFileName(name);
    if (runId === undefined || !named.has(runId)) continue;
    files.set(posix.join('spill', name), await nodeFileSystem.readFile(join(dataDir, 'spill', name)));
  }
  return { manifest, files, schedules: await manifestSchedules(nodeFileSystem, join(dataDir, 'spill'), manifest) };
}

/** A file as partition file systems store it: 1 MiB chunks, chunk 0 always there. */
async function insertFile(tx: TransactionSql, partition: number, name: string, body: Uint8Array): Promise<void> {
  for (let chunk = 0, at = 0; chunk === 0 || at < body.length; chunk++, at += chunkBytes) {
    const part = Buffer.from(body.buffer, body.byteOffset + at, Math.min(chunkBytes, body.length - at));
    await tx`INSERT INTO fermata_checkpoint_files (partition, name, chunk, body) VALUES (${partition}, ${name}, ${chunk}, ${part})`;
  }
}

/**
 * A schedule as its partition's log records it: a put at its mark (which sets the mark there), a
 * pause when it is paused. The rows carry the partition's epoch as it is: nobody owns it while
 * the import holds its row, and whoever takes it next raises the epoch past them.
 */
async function appendSchedules(tx: TransactionSql, partition: number, firstSeq: number, schedules: readonly ManifestSchedule[]): Promise<void> {
  const [row] = await tx<{ epoch: string }[]>`SELECT epoch::text AS epoch FROM fermata_partitions WHERE partition = ${partition}`;
  let seq = firstSeq;
  for (const schedule of schedules) {
    const definition = definitionFromJson(schedule.definition);
    if (definition === undefined) throw new Error(`schedule ${JSON.stringify(schedule.name)}: its definition in the manifest does not read`);
    const bodies = [encodeScheduleChange({ op: 'put', name: schedule.name, atMs: schedule.mark_ms, definition })];
    if (schedule.paused) bodies.push(encodeScheduleChange({ op: 'pause', name: schedule.name, atMs: schedule.mark_ms }));
    for (const body of bodies) {
      await tx`INSERT INTO fermata_log (partition, seq, type, epoch, body) VALUES (${partition}, ${seq++}, ${recordType.schedule}, ${row?.epoch ?? '0'}, ${Buffer.from(body)})`;
    }
  }
}
