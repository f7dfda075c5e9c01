// A node's membership in the cluster: its row in fermata_nodes (migration 2), registered at
// start, heartbeaten by the ownership loop, marked 'leaving' while it hands its partitions over
// and 'left' after. Every time in these rows is PostgreSQL's (now(), clock_timestamp()): the
// nodes' own clocks may disagree with each other, the database's is the one they all read.
//
// A node is live while its state is 'live' and its last heartbeat is younger than the lease
// TTL, the same span after which its leases lapse: a node that died drops out of the balance
// when its partitions become free.
//
// The node id comes from the configuration or, without one, is generated once and kept in the
// data directory (`cluster-node-id`), so a restarted node is the same node.
//
// Main thread (the ownership loop).
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type postgres from 'postgres';
import type { FileSystem } from '../engine/fs/file-system.ts';

export const nodeIdFileName = 'cluster-node-id';
const nodeIdPattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** A node id that is not one: a configured or stored id must be 1–128 of [A-Za-z0-9._-], starting with a letter or digit. */
export class NodeIdError extends Error {
  override readonly name = 'NodeIdError';
}

export function isNodeId(value: string): boolean {
  return nodeIdPattern.test(value);
}

/**
 * This node's id: `configured` when given, else the one kept in `dataDir`, else a new one
 * (host name and 48 random bits) written there durably before it is used.
 */
export async function resolveNodeId(fs: FileSystem, dataDir: string, configured?: string): Promise<string> {
  if (configured !== undefined) {
    if (!isNodeId(configured)) throw new NodeIdError(`cluster.node_id ${JSON.stringify(configured)} is not a node id (1–128 of A-Z a-z 0-9 . _ -)`);
    return configured;
  }
  const path = join(dataDir, nodeIdFileName);
  const stored = await readIfPresent(fs, path);
  if (stored !== undefined) {
    const id = new TextDecoder().decode(stored).trim();
    if (!isNodeId(id)) throw new NodeIdError(`${path} holds ${JSON.stringify(id)}, not a node id`);
    return id;
  }
  const host = hostname().replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 100);
  const id = `${host === '' ? 'node' : host}-${randomBytes(6).toString('hex')}`;
  await writeDurably(fs, dataDir, path, new TextEncoder().encode(`${id}\n`));
  return id;
}

async function readIfPresent(fs: FileSystem, path: string): Promise<Uint8Array | undefined> {
  try {
    return await fs.readFile(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** Written beside, synced, renamed into place and the directory synced: a crash leaves the old state or the whole file. */
async function writeDurably(fs: FileSystem, dir: string, path: string, bytes: Uint8Array): Promise<void> {
  await fs.mkdirp(dir);
  const temporary = `${path}.new`;
  await fs.unlink(temporary).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
  });
  const handle = await fs.open(temporary, 'create');
  try {
    await handle.writev([bytes], 0);
    await handle.datasync();
  } finally {
    await handle.close();
  }
  await fs.rename(temporary, path);
  await fs.syncDir(dir);
}

export interface LiveNode {
  readonly nodeId: string;
  /** Where other nodes reach it (host:port), for forwarding. */
  readonly advertise: string;
}

export interface MembershipOptions {
  readonly sql: postgres.Sql;
  readonly nodeId: string;
  readonly advertise: string;
  /** A node whose last heartbeat is older than this is not live (the lease TTL). */
  readonly liveForMs: number;
}

export class Membership {
  readonly nodeId: string;
  /** This process's registration: a heartbeat counts only while the row still names it. */
  readonly incarnation = randomBytes(12).toString('hex');
  readonly #sql: postgres.Sql;
  readonly #advertise: string;
  readonly #liveForMs: number;

  constructor(options: MembershipOptions) {
    if (!isNodeId(options.nodeId)) throw new NodeIdError(`${JSON.stringify(options.nodeId)} is not a node id`);
    this.nodeId = options.nodeId;
    this.#sql = options.sql;
    this.#advertise = options.advertise;
    this.#liveForMs = options.liveForMs;
  }

  /** Enters (or re-enters) the cluster as live, this process the node's incarnation from now on. */
  async register(): Promise<void> {
    await this.#sql`
      INSERT INTO fermata_nodes (node_id, incarnation, advertise, started_at, heartbeat_at, state)
      VALUES (${this.nodeId}, ${this.incarnation}, ${this.#advertise}, now(), clock_timestamp(), 'live')
      ON CONFLICT (node_id) DO UPDATE SET
        incarnation = EXCLUDED.incarnation, advertise = EXCLUDED.advertise,
        started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at, state = 'live'`;
  }

  /**
   * Stamps the heartbeat with PostgreSQL's clock. False when the row no longer names this
   * process (another one registered the node id since, or this one left): it must not go on as
   * the node.
   */
  async heartbeat(): Promise<boolean> {
    const rows = await this.#sql`
      UPDATE fermata_nodes SET heartbeat_at = clock_timestamp()
      WHERE node_id = ${this.nodeId} AND incarnation = ${this.incarnation} AND state <> 'left'
      RETURNING 1 AS beat`;
    return rows.length === 1;
  }

  /** The live nodes, in node id order. A leaving node is not among them: nothing should be balanced onto it. */
  async liveNodes(): Promise<LiveNode[]> {
    const rows = await this.#sql<{ node_id: string; advertise: string }[]>`
      SELECT node_id, advertise FROM fermata_nodes
      WHERE state = 'live' AND heartbeat_at > now() - make_interval(secs => ${this.#liveForMs / 1000})
      ORDER BY node_id COLLATE "C"`;
    return rows.map((row) => ({ nodeId: row.node_id, advertise: row.advertise }));
  }

  /** Out of the balance (others take its partitions as it releases them), still heartbeating. */
  async leaving(): Promise<void> {
    await this.#setState('leaving');
  }

  /** Gone: its partitions are handed over. */
  async left(): Promise<void> {
    await this.#setState('left');
  }

  async #setState(state: 'leaving' | 'left'): Promise<void> {
    await this.#sql`UPDATE fermata_nodes SET state = ${state} WHERE node_id = ${this.nodeId} AND incarnation = ${this.incarnation}`;
  }
}
