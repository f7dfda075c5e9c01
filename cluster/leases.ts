// Partition leases: the rows of fermata_partitions (migration 1) this node acquires, renews and
// releases, and the local deadlines (lease-deadline.ts) that follow them. PostgreSQL decides
// who owns what, on its own clock; this process keeps what it holds (partition → epoch) and
// never trusts it further than the last renewal PostgreSQL confirmed.
//
// - acquire: a partition that is unowned, lapsed (lease_until past, on PostgreSQL's clock, by at
//   least a grace), or owned by an earlier process of this node. Every acquisition bumps the
//   epoch, so an epoch names one process's tenure: the deposed process, paused or partitioned,
//   is fenced at its next append (engine/pg-log checks the epoch in the append's transaction,
//   holding the row in share mode to its COMMIT: engine/pg-log/fence.ts). A row so held is
//   skipped, not waited for, and taken at a later round: one owner stopped while it held a row
//   must not stop this node's rounds, its renewals with them, for as long as the lock lasts.
// - renew: every partition held, in one statement, lease_until = now() + ttl, only where the row
//   still names this node at the epoch held; a partition the statement does not return is lost.
// - release: the local deadline goes to zero, the caller's engine for the partition closes, then
//   the owner is cleared (lease_until = now(), so the grace others wait on counts from it), and
//   the node the balance names takes it at once with epoch + 1.
//
// One renewal at a time (the ownership loop awaits each); acquisitions and releases may run
// beside it. Main thread.
import assert from 'node:assert/strict';
import type postgres from 'postgres';
import { LeaseDeadlines, monotonicNs } from './lease-deadline.ts';

export interface LeaseSettings {
  /** How long a renewal holds a lease, on PostgreSQL's clock; a dead node's partitions move after about this long. */
  readonly leaseTtlMs: number;
  /** How often the ownership loop renews (and heartbeats, and balances). */
  readonly renewIntervalMs: number;
  /** How much earlier than ttl after a renewal was sent this node stops delivering: slack for clock rates and scheduling. */
  readonly safetyMarginMs: number;
  /** How long a lapsed or released partition whose balance target is another node waits for it before anyone takes it. */
  readonly graceMs: number;
}

/** Takeover within about ttl + one renew interval (6 s) after a kill -9; four renewals may fail in a row before deliveries stop. */
export const defaultLeaseSettings: LeaseSettings = {
  leaseTtlMs: 5_000,
  renewIntervalMs: 1_000,
  safetyMarginMs: 1_000,
  graceMs: 2_000,
};

/** Asserts the relations the deadline's reasoning stands on. */
export function checkLeaseSettings(settings: LeaseSettings): void {
  const { leaseTtlMs, renewIntervalMs, safetyMarginMs, graceMs } = settings;
  for (const [name, value] of Object.entries(settings)) assert.ok(Number.isSafeInteger(value) && value > 0, `lease setting ${name} is a positive whole number of ms, not ${value}`);
  assert.ok(safetyMarginMs < leaseTtlMs, `the safety margin (${safetyMarginMs} ms) is shorter than the lease TTL (${leaseTtlMs} ms)`);
  assert.ok(renewIntervalMs < leaseTtlMs - safetyMarginMs, `a renewal (every ${renewIntervalMs} ms) comes before the local deadline (TTL ${leaseTtlMs} ms − margin ${safetyMarginMs} ms)`);
  assert.ok(graceMs >= renewIntervalMs, `the grace (${graceMs} ms) gives the balance's own target at least one round (${renewIntervalMs} ms)`);
}

interface Held {
  readonly epoch: bigint;
  /** Being handed over: renewals keep the row (nobody takes it mid-close), but never the deadline. */
  releasing: boolean;
}

export interface LeasesOptions {
  readonly sql: postgres.Sql;
  readonly nodeId: string;
  /** Written into the lease row (owner_address): where requests for the partition are forwarded. */
  readonly advertise: string;
  readonly settings: LeaseSettings;
  readonly deadlines: LeaseDeadlines;
}

export class Leases {
  readonly #sql: postgres.Sql;
  readonly #nodeId: string;
  readonly #advertise: string;
  readonly #ttlSeconds: number;
  readonly #deadlineAfterSendNs: bigint;
  readonly #deadlines: LeaseDeadlines;
  readonly #held = new Map<number, Held>();

  constructor(options: LeasesOptions) {
    checkLeaseSettings(options.settings);
    this.#sql = options.sql;
    this.#nodeId = options.nodeId;
    this.#advertise = options.advertise;
    this.#ttlSeconds = options.settings.leaseTtlMs / 1000;
    this.#deadlineAfterSendNs = BigInt(options.settings.leaseTtlMs - options.settings.safetyMarginMs) * 1_000_000n;
    this.#deadlines = options.deadlines;
  }

  /** The partitions this process holds, with their epochs (those being released included). */
  held(): ReadonlyMap<number, bigint> {
    return new Map([...this.#held].map(([partition, held]) => [partition, held.epoch]));
  }

  holds(partition: number): boolean {
    return this.#held.has(partition);
  }

  /**
   * Takes those of `partitions` that are free: unowned or lapsed for at least `graceMs` (0:
   * lapsed at all), or owned by an earlier process of this node, and not held by a write in
   * flight. Returns each one taken with its new epoch; the rest stay whoever's they are.
   */
  async acquire(partitions: readonly number[], graceMs = 0): Promise<Map<number, bigint>> {
    const wanted = partitions.filter((partition) => !this.#held.has(partition));
    const taken = new Map<number, bigint>();
    if (wanted.length === 0) return taken;
    const sentNs = monotonicNs();
    const rows = await this.#sql<{ partition: number; epoch: string }[]>`
      UPDATE fermata_partitions AS p
         SET epoch = p.epoch + 1, owner = ${this.#nodeId}, owner_address = ${this.#advertise},
             lease_until = now() + make_interval(secs => ${this.#ttlSeconds})
        FROM (SELECT partition FROM fermata_partitions
               WHERE partition = ANY(${wanted}::int[])
                 AND (owner = ${this.#nodeId}
                      OR coalesce(lease_until, '-infinity') <= now() - make_interval(secs => ${graceMs / 1000}))
                 FOR UPDATE SKIP LOCKED) AS free
       WHERE p.partition = free.partition
      RETURNING p.partition, p.epoch::text AS epoch`;
    for (const row of rows) {
      const epoch = BigInt(row.epoch);
      assert.ok(!this.#held.has(row.partition), `partition ${row.partition} was acquired twice by one process`);
      this.#held.set(row.partition, { epoch, releasing: false });
      this.#deadlines.extend(row.partition, sentNs + this.#deadlineAfterSendNs);
      taken.set(row.partition, epoch);
    }
    return taken;
  }

  /**
   * Renews every lease held, in one statement. Returns the partitions lost: no longer this
   * node's at the epoch held (taken over after a lapse). Their deadlines are revoked and they
   * are no longer held; a lost partition being released is left to its release.
   */
  async renew(): Promise<number[]> {
    const sent = [...this.#held];
    if (sent.length === 0) return [];
    const sentNs = monotonicNs();
    const rows = await this.#sql<{ partition: number }[]>`
      UPDATE fermata_partitions AS p
         SET lease_until = now() + make_interval(secs => ${this.#ttlSeconds})
        FROM unnest(${sent.map(([partition]) => partition)}::int[], ${sent.map(([, held]) => held.epoch.toString())}::bigint[]) AS held (partition, epoch)
       WHERE p.partition = held.partition AND p.epoch = held.epoch AND p.owner = ${this.#nodeId}
      RETURNING p.partition`;
    const renewed = new Set(rows.map((row) => row.partition));
    const lost: number[] = [];
    for (const [partition, held] of sent) {
      // A release that finished while the renewal was in flight has forgotten the partition.
      if (this.#held.get(partition) !== held) continue;
      if (renewed.has(partition)) {
        if (!held.releasing) this.#deadlines.extend(partition, sentNs + this.#deadlineAfterSendNs);
      } else {
        this.#deadlines.revoke(partition);
        this.#held.delete(partition);
        if (!held.releasing) lost.push(partition);
      }
    }
    return lost;
  }

  /**
   * Hands `partition` over: no send from now on, `stopEngine` (the engine for it closes), then
   * the row is freed. False when it was no longer this node's by then (lost meanwhile).
   */
  async release(partition: number, stopEngine: () => Promise<void>): Promise<boolean> {
    const held = this.#held.get(partition);
    assert.ok(held !== undefined && !held.releasing, `partition ${partition} is released only while held and not yet releasing`);
    held.releasing = true;
    this.#deadlines.revoke(partition);
    try {
      await stopEngine();
      const rows = await this.#sql`
        UPDATE fermata_partitions SET owner = NULL, owner_address = NULL, lease_until = now()
         WHERE partition = ${partition} AND epoch = ${held.epoch.toString()}::bigint AND owner = ${this.#nodeId}
        RETURNING 1 AS released`;
      return rows.length === 1;
    } finally {
      if (this.#held.get(partition) === held) this.#held.delete(partition);
    }
  }

  /** Forgets every lease at once, revoking its deadline (this process is no longer the node: see Membership.heartbeat). */
  abandonAll(): number[] {
    const partitions = [...this.#held.keys()];
    for (const partition of partitions) this.#deadlines.revoke(partition);
    this.#held.clear();
    return partitions;
  }
}
