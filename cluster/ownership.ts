// The ownership loop of one node: membership, leases and balance tied together. Each round
// (every renewIntervalMs, one at a time):
//
//   1. heartbeat + renew every lease held (side by side)   → lost ones: onLose(p)
//   2. live nodes → assignment (balance.ts) → this node's target set
//   3. acquire the target partitions that are free (unowned, released, lapsed) at once, and any
//      other free one after the grace (its target is live but not taking it)   → onAcquire(p, epoch)
//   4. hand over (release) held partitions whose target is another live node, a few at a time:
//      beforeRelease(p) closes the engine first, then the row is freed and the target takes it
//      at its next round, with no wait for a lease to lapse
//
// stop() leaves cleanly: out of the balance ('leaving'), every partition handed over (renewals
// go on meanwhile, so none lapses mid-close), then 'left'.
//
// Transitions of one partition (acquire, lose, release) run one after another: a release waits
// for the onAcquire before it. The callbacks are the node runner's (one engine per partition);
// a failed onAcquire hands the partition back. The local deadlines (`deadlines`, shared with
// the delivery workers) follow every lease. Main thread.
import type postgres from 'postgres';
import { assignPartitions, targetSet } from './balance.ts';
import { LeaseDeadlines } from './lease-deadline.ts';
import { Leases, checkLeaseSettings, defaultLeaseSettings, type LeaseSettings } from './leases.ts';
import { Membership } from './membership.ts';

export interface OwnershipCallbacks {
  /** This node owns `partition` at `epoch` from now: open its engine (replay) and deliver. */
  onAcquire(partition: number, epoch: bigint): Promise<void>;
  /** `partition` is no longer this node's (taken over after a lapse): its engine stops at once; its appends are fenced already. */
  onLose(partition: number): void;
  /** `partition` is being handed over: close its engine; the row is freed when this resolves. */
  beforeRelease(partition: number): Promise<void>;
  /** A round or a transition failed (the database unreachable, an engine that would not open); the loop goes on. */
  onError(error: unknown): void;
}

export interface OwnershipOptions {
  readonly sql: postgres.Sql;
  readonly nodeId: string;
  readonly advertise: string;
  readonly settings?: LeaseSettings;
  /** Partitions handed over at once when the balance moves some away (a node joined). */
  readonly handoversAtOnce?: number;
  readonly callbacks: OwnershipCallbacks;
}

export const defaultHandoversAtOnce = 4;

export class Ownership {
  readonly nodeId: string;
  readonly partitions: number;
  /** The local lease deadlines, for the delivery workers (LeaseDeadlineView over `deadlines.shared`). */
  readonly deadlines: LeaseDeadlines;
  readonly #membership: Membership;
  readonly #leases: Leases;
  readonly #settings: LeaseSettings;
  readonly #handoversAtOnce: number;
  readonly #callbacks: OwnershipCallbacks;
  /** The last transition of each partition; the next one starts after it. */
  readonly #transitions = new Map<number, Promise<void>>();
  readonly #releasing = new Set<number>();
  #assignment: { readonly key: string; readonly owners: readonly string[] } | undefined;
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> | undefined;
  #state: 'running' | 'leaving' | 'stopped' = 'running';

  private constructor(options: OwnershipOptions, partitions: number, settings: LeaseSettings) {
    this.nodeId = options.nodeId;
    this.partitions = partitions;
    this.#settings = settings;
    this.#handoversAtOnce = options.handoversAtOnce ?? defaultHandoversAtOnce;
    this.#callbacks = options.callbacks;
    this.deadlines = new LeaseDeadlines(partitions);
    this.#membership = new Membership({ sql: options.sql, nodeId: options.nodeId, advertise: options.advertise, liveForMs: settings.leaseTtlMs });
    this.#leases = new Leases({ sql: options.sql, nodeId: options.nodeId, advertise: options.advertise, settings, deadlines: this.deadlines });
  }

  /** Registers the node and runs its first round before it resolves; rounds go on until stop(). */
  static async start(options: OwnershipOptions): Promise<Ownership> {
    const settings = options.settings ?? defaultLeaseSettings;
    checkLeaseSettings(settings);
    const [cluster] = await options.sql<{ partitions: number }[]>`SELECT partitions FROM fermata_cluster`;
    if (cluster === undefined) throw new Error('the database holds no fermata cluster: run `fermata cluster init` first');
    const ownership = new Ownership(options, cluster.partitions, settings);
    await ownership.#membership.register();
    await ownership.#runRound();
    return ownership;
  }

  /** The partitions this node holds now, with their epochs (those being handed over included). */
  owned(): ReadonlyMap<number, bigint> {
    return this.#leases.held();
  }

  /** Leaves the cluster: out of the balance, every partition handed over, then gone. */
  async stop(): Promise<void> {
    if (this.#state !== 'running') return;
    this.#state = 'leaving';
    await this.#membership.leaving();
    // Rounds go on (renewals) while the engines close.
    await Promise.all([...this.#leases.held().keys()].filter((partition) => !this.#releasing.has(partition)).map((partition) => this.#release(partition)));
    await Promise.all(this.#transitions.values());
    this.#state = 'stopped';
    clearTimeout(this.#timer);
    await this.#round;
    await this.#membership.left();
  }

  /** Stops the rounds without a handover (tests: a node that stops renewing as a dead one would). */
  halt(): void {
    this.#state = 'stopped';
    clearTimeout(this.#timer);
  }

  async #runRound(): Promise<void> {
    const startedMs = performance.now();
    this.#round = this.#roundOnce().catch((error: unknown) => this.#callbacks.onError(error));
    await this.#round;
    if (this.#state === 'stopped') return;
    const waitMs = Math.max(0, this.#settings.renewIntervalMs - (performance.now() - startedMs));
    this.#timer = setTimeout(() => void this.#runRound(), waitMs);
  }

  async #roundOnce(): Promise<void> {
    const [lost, stillTheNode] = await Promise.all([this.#leases.renew(), this.#membership.heartbeat()]);
    for (const partition of lost) this.#chain(partition, async () => this.#callbacks.onLose(partition));
    if (!stillTheNode) {
      // Another process registered this node id: it is the node now, this one holds nothing.
      for (const partition of this.#leases.abandonAll()) this.#chain(partition, async () => this.#callbacks.onLose(partition));
      this.halt();
      throw new Error(`node ${this.nodeId} was registered by another process: this one stopped owning partitions`);
    }
    if (this.#state !== 'running') return;

    const live = (await this.#membership.liveNodes()).map((node) => node.nodeId);
    if (!live.includes(this.nodeId)) live.push(this.nodeId);
    const owners = this.#ownersOver(live);
    const target = targetSet(owners, this.nodeId);
    const held = this.#leases.held();
    const others: number[] = [];
    for (let partition = 0; partition < this.partitions; partition += 1) if (!held.has(partition) && !target.has(partition)) others.push(partition);

    this.#acquired(await this.#leases.acquire([...target].filter((partition) => !held.has(partition))));
    this.#acquired(await this.#leases.acquire(others, this.#settings.graceMs));

    const handovers = [...held.keys()].filter((partition) => !target.has(partition) && !this.#releasing.has(partition));
    for (const partition of handovers.slice(0, Math.max(0, this.#handoversAtOnce - this.#releasing.size))) void this.#release(partition);
  }

  #ownersOver(live: readonly string[]): readonly string[] {
    const key = [...live].sort().join('\n');
    if (this.#assignment?.key !== key) this.#assignment = { key, owners: assignPartitions(this.partitions, live) };
    return this.#assignment.owners;
  }

  #acquired(taken: ReadonlyMap<number, bigint>): void {
    for (const [partition, epoch] of taken) {
      this.#chain(partition, async () => {
        try {
          await this.#callbacks.onAcquire(partition, epoch);
        } catch (error) {
          this.#callbacks.onError(error);
          if (this.#leases.holds(partition)) await this.#leases.release(partition, async () => {});
        }
      });
    }
  }

  #release(partition: number): Promise<void> {
    this.#releasing.add(partition);
    return this.#chain(partition, async () => {
      try {
        if (this.#leases.holds(partition)) await this.#leases.release(partition, () => this.#callbacks.beforeRelease(partition));
      } finally {
        this.#releasing.delete(partition);
      }
    });
  }

  /** Runs `step` after the partition's previous transition; its failure goes to onError. */
  #chain(partition: number, step: () => Promise<void>): Promise<void> {
    const previous = this.#transitions.get(partition) ?? Promise.resolve();
    const next = previous.then(step).catch((error: unknown) => this.#callbacks.onError(error));
    this.#transitions.set(partition, next);
    void next.then(() => {
      if (this.#transitions.get(partition) === next) this.#transitions.delete(partition);
    });
    return next;
  }
}
