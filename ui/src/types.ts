// The shapes of the API answers the page reads (docs/api.md), as far as it reads them.

export interface Counts {
  readonly pending: number;
  readonly resident: number;
  readonly spilled: number;
  readonly in_flight: number;
  readonly delivered: number;
  readonly dead: number;
  readonly cancelled: number;
}

/** GET /v1/stats of a single node. */
export interface NodeStats extends Counts {
  readonly held: number;
  readonly paused_queues: number;
  readonly horizon: number | null;
  readonly memory: { readonly budget_bytes: number | null; readonly resident_bytes: number; readonly spill_metadata_bytes: number; readonly add_times_bytes: number };
  readonly wal: { readonly last_seq: number; readonly syncs: number; readonly appends: number; readonly poisoned: boolean; readonly last_sync_at: string | null };
  /** Absent where the service runs without a disk check. */
  readonly disk?: { readonly data_bytes: number | null; readonly free_bytes: number | null; readonly free_bytes_min: number };
  readonly schedules: { readonly count: number };
}

/** GET /v1/stats in cluster mode. */
export interface ClusterStats {
  readonly node: { readonly node_id: string; readonly totals: Counts };
  readonly cluster: { readonly nodes: number; readonly totals: Counts; readonly unreachable: readonly string[]; readonly moving: readonly number[] };
}

export type Stats = NodeStats | ClusterStats;

export function isClusterStats(stats: Stats): stats is ClusterStats {
  return 'cluster' in stats;
}

export interface Queue {
  readonly name: string;
  readonly delivery: string;
  readonly max_attempts: number;
  readonly rate_per_s: number | null;
  readonly max_concurrent: number | null;
  readonly timeout_ms: number;
  readonly paused: boolean;
  /** How long a delivered or cancelled timer is kept, in ms (null: the service's). */
  readonly retention_ms: number | null;
  /** How long a dead timer is kept, in ms (null: the service's). */
  readonly dead_retention_ms: number | null;
  /** Its timers not finished, at most (null: no cap). */
  readonly max_pending: number | null;
  /** Waiting (pending, retrying, held), in memory and spilled to disk alike. */
  readonly pending: number;
  readonly in_flight: number;
  readonly delivered_per_s: number;
}

export interface Timer {
  readonly id: string;
  readonly state: string;
  readonly revision: number;
  readonly fire_at: string;
  readonly attempts: number;
  readonly queue: string;
  readonly key: string | null;
  readonly last_status: number | null;
  readonly last_error: string | null;
  readonly last_attempt_at: string | null;
  readonly next_attempt_at: string | null;
  readonly target: string;
  readonly created_at: string | null;
}

export interface DeadTimer {
  readonly id: string;
  readonly queue: string;
  readonly target: string;
  readonly attempts: number;
  readonly last_status: number | null;
  readonly reason: string;
  readonly last_error: string | null;
  readonly last_attempt_at: string | null;
}

export interface Schedule {
  readonly name: string;
  readonly cron?: string;
  readonly time_zone?: string;
  readonly every_ms?: number;
  readonly target: string;
  readonly queue: string;
  readonly paused: boolean;
  readonly next: readonly { readonly fire_at: string }[];
}

export interface ClusterView {
  readonly node_id: string;
  readonly partitions: number;
  readonly owned: readonly { readonly partition: number; readonly epoch: string | number | null; readonly replay_records: number | null }[];
  readonly owners: readonly { readonly partition: number; readonly here: boolean; readonly address: string | null }[];
}
