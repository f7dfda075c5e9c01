// The local lease deadline of each partition this node owns: the instant, on this machine's
// monotonic clock, after which the owner hands out no delivery for the partition, because its
// lease in PostgreSQL may have lapsed and another node may own it. A deadline is
//   (monotonic time when the renewal request that last succeeded was SENT) + ttl − safety margin,
// which comes before the lease's lapse on PostgreSQL's clock (docs/cluster.md, "Ownership and
// failover", says why). Zero means "not ours": never acquired, lost, or being handed over.
//
// The deadlines live in a SharedArrayBuffer so a delivery worker checks one before each send
// with two loads and no message to the main thread (as engine/clock.ts shares the test clock):
//
//   BigInt64Array: [ refused sends | deadline of partition 0 | deadline of partition 1 | … ]
//                    Atomics.add       nanoseconds of process.hrtime.bigint() (CLOCK_MONOTONIC:
//                                      one clock for every thread of the process)
//
// Written by the ownership loop (main thread: LeaseDeadlines); read by any thread
// (LeaseDeadlineView, made from `shared`).
import assert from 'node:assert/strict';

/** This process's monotonic clock in nanoseconds, the same on every thread. */
export function monotonicNs(): bigint {
  return process.hrtime.bigint();
}

const refusedCell = 0;
const firstDeadlineCell = 1;

/** Any thread's view: may a send for this partition go out now? */
export class LeaseDeadlineView {
  readonly #cells: BigInt64Array;

  constructor(shared: SharedArrayBuffer) {
    this.#cells = new BigInt64Array(shared);
    assert.ok(this.#cells.length > firstDeadlineCell, 'a lease deadline table holds at least one partition');
  }

  get partitions(): number {
    return this.#cells.length - firstDeadlineCell;
  }

  /** True while `partition`'s deadline is ahead; false (and counted as a refused send) once it has passed or was revoked. */
  maySend(partition: number): boolean {
    if (monotonicNs() < Atomics.load(this.#cells, firstDeadlineCell + partition)) return true;
    Atomics.add(this.#cells, refusedCell, 1n);
    return false;
  }

  /** Sends maySend refused since the table was made, over every thread. */
  refusedSends(): number {
    return Number(Atomics.load(this.#cells, refusedCell));
  }

  /** The deadline in monotonic ns (0: none), for the ownership loop's tests and status. */
  deadlineNs(partition: number): bigint {
    assert.ok(Number.isInteger(partition) && partition >= 0 && partition < this.partitions, `partition ${partition} is out of range`);
    return Atomics.load(this.#cells, firstDeadlineCell + partition);
  }
}

/** The ownership loop's handle: moves deadlines forward on renewal, to zero on loss or handover. */
export class LeaseDeadlines extends LeaseDeadlineView {
  readonly #shared: SharedArrayBuffer;
  readonly #cells: BigInt64Array;

  constructor(partitions: number) {
    assert.ok(Number.isSafeInteger(partitions) && partitions > 0, `a cluster has a positive number of partitions, not ${partitions}`);
    const shared = new SharedArrayBuffer((partitions + firstDeadlineCell) * BigInt64Array.BYTES_PER_ELEMENT);
    super(shared);
    this.#shared = shared;
    this.#cells = new BigInt64Array(shared);
  }

  /** The memory the deadlines live in, for the delivery workers (new LeaseDeadlineView(shared)). */
  get shared(): SharedArrayBuffer {
    return this.#shared;
  }

  /**
   * Moves `partition`'s deadline to `deadlineNs` if that is later: renewals complete in the
   * order they were sent, but a slow answer must never pull a deadline back past a newer one.
   */
  extend(partition: number, deadlineNs: bigint): void {
    const cell = firstDeadlineCell + partition;
    assert.ok(cell < this.#cells.length, `partition ${partition} is out of range`);
    if (deadlineNs > Atomics.load(this.#cells, cell)) Atomics.store(this.#cells, cell, deadlineNs);
  }

  /** No more sends for `partition` from now on (lost, or being handed over). */
  revoke(partition: number): void {
    const cell = firstDeadlineCell + partition;
    assert.ok(cell < this.#cells.length, `partition ${partition} is out of range`);
    Atomics.store(this.#cells, cell, 0n);
  }
}
