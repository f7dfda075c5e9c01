// What a resident timer holds beyond its fixed-width columns (resident-store.ts): its payload,
// headers, key and callbacks, one run in the byte arena (byte-arena.ts) that the columns point
// into, and its target, interned in the target table (target-table.ts) that the targetIndex
// column points into. Reads of a slot's bytes are views into the arena; compaction moves runs
// out of sparse slabs. The store extends this class and adds and frees both as timers come and
// go; main thread.
//
//   arena run at bytesRefOf(slot):  [ payload | headers | key | callbacks run (when keyLength's top bit) ]
//                                     payloadLength headersLength keyLength  (its own header: callback-bytes.ts)
import assert from 'node:assert/strict';
import { storeLimits } from '../limits.ts';
import type { ColumnsAheadOptions } from '../memory/columns-ahead.ts';
import { ByteArena, type ByteArenaOptions } from './byte-arena.ts';
import { callbacksRunBytesAt, callbacksRunHeaderBytes } from './callback-bytes.ts';
import { keyHasCallbacksBit } from './resident-layout.ts';
import { ResidentSlots } from './resident-slots.ts';
import { TargetTable } from './target-table.ts';
import { timerState } from './timer-state.ts';

export class ResidentContent extends ResidentSlots {
  /** Payload and headers bytes; read its counters for stats, never add or free through it. */
  readonly arena: ByteArena;
  /** The targets the targetIndex column points into (target-table.ts). */
  protected readonly targets = new TargetTable();
  /** The table's names, the same array for its life: read by targetOf() once per timer delivered. */
  protected readonly targetNames = this.targets.names;

  protected constructor(capacity: number, capacityMax: number, options: ColumnsAheadOptions & { readonly arena?: ByteArenaOptions }) {
    super(capacity, capacityMax, options);
    this.arena = new ByteArena(options.arena);
  }

  /** Distinct targets interned. */
  get targetCount(): number {
    return this.targets.size;
  }

  /**
   * The index of `target` in the target table, adding it if new, and pinned: it stays valid
   * until releaseTarget(index), whatever happens to the timers using it meanwhile. A batch
   * interns each distinct target once, allocates its rows, then releases its pins.
   */
  internTarget(target: string): number {
    return this.targets.intern(target);
  }

  /** Drops a pin taken by internTarget(); the target is freed once no pin or timer holds it. */
  releaseTarget(index: number): void {
    assert.ok(this.targets.isInterned(index), 'released a target that is not interned');
    this.targets.unref(index);
  }

  /** Timers and pins holding target `index` (0 for an index no longer interned). */
  targetRefCount(index: number): number {
    return this.targets.refCount(index);
  }

  targetOf(slot: number): string {
    this.assertLive(slot);
    return this.targetNames[this.targetIndexColumn[slot] as number] as string;
  }

  /** The payload bytes, a view into the arena: copy them before the slot is released. */
  payloadOf(slot: number): Uint8Array {
    this.assertLive(slot);
    return this.arena.view(this.bytesRefOf(slot), this.payloadLengthColumn[slot] as number);
  }

  /** The headers bytes (JSON), a view into the arena: copy them before the slot is released. */
  headersOf(slot: number): Uint8Array {
    this.assertLive(slot);
    const payloadLength = this.payloadLengthColumn[slot] as number;
    return this.arena.view(this.bytesRefOf(slot) + payloadLength, this.headersLengthColumn[slot] as number);
  }

  /** The idempotency key bytes (empty: none), a view into the arena. */
  keyOf(slot: number): Uint8Array {
    this.assertLive(slot);
    const at = this.bytesRefOf(slot) + (this.payloadLengthColumn[slot] as number) + (this.headersLengthColumn[slot] as number);
    return this.arena.view(at, this.keyLengthOf(slot));
  }

  /** Whether the timer has a callback or a failure callback (a callbacks run follows its key). */
  hasCallbacks(slot: number): boolean {
    return ((this.keyLengthColumn[slot] as number) & keyHasCallbacksBit) !== 0;
  }

  /** The slot's callbacks run (callback-bytes.ts; empty: no callbacks), a view into the arena. */
  callbacksOf(slot: number): Uint8Array {
    this.assertLive(slot);
    return this.arena.view(this.#callbacksRef(slot), this.callbacksLengthOf(slot));
  }

  /** Bytes of the slot's callbacks run (0: none), read from the run's own header. */
  callbacksLengthOf(slot: number): number {
    if (!this.hasCallbacks(slot)) return 0;
    const ref = this.#callbacksRef(slot);
    return callbacksRunBytesAt(this.arena.slabOf(ref, callbacksRunHeaderBytes), this.arena.offsetOf(ref));
  }

  #callbacksRef(slot: number): number {
    return this.bytesRefOf(slot) + (this.payloadLengthColumn[slot] as number) + (this.headersLengthColumn[slot] as number) + this.keyLengthOf(slot);
  }

  payloadLengthOf(slot: number): number {
    return this.payloadLengthColumn[slot] as number;
  }

  headersLengthOf(slot: number): number {
    return this.headersLengthColumn[slot] as number;
  }

  /** Bytes of the slot's payload, headers, key and callbacks together (what it holds in the arena). */
  bytesLengthOf(slot: number): number {
    return (this.payloadLengthColumn[slot] as number) + (this.headersLengthColumn[slot] as number) + this.keyLengthOf(slot) + this.callbacksLengthOf(slot);
  }

  /**
   * Moves the payload and headers of every live timer out of arena slabs whose live share is
   * below `liveRatioMax`, so those slabs are released; returns how many timers moved. One pass
   * over all slots: call it when the arena's bytesLive / bytesReserved has fallen, not per tick.
   */
  compact(liveRatioMax: number = storeLimits.arenaCompactLiveRatio): number {
    // A held snapshot reads its timers' bytes where they were taken.
    assert.ok(!this.freeSlots.snapshotHeld, 'compaction while a snapshot is held');
    if (this.arena.markSparseSlabs(liveRatioMax) === 0) return 0;
    let moved = 0;
    for (let slot = 0; slot < this.freeSlots.highWater; slot++) {
      if (this.stateColumn[slot] === timerState.free) continue;
      const ref = this.bytesRefOf(slot);
      const length = this.bytesLengthOf(slot);
      if (!this.arena.isMarked(ref, length)) continue;
      this.setBytesRef(slot, this.arena.move(ref, length));
      moved++;
    }
    this.arena.markSparseSlabs(0); // no slab is below a ratio of 0: clears the marks
    return moved;
  }

  /** Lets go of memory made ahead and not used: the arena's slabs and the next columns. */
  dropPrefaulted(): void {
    this.arena.dropPrefaulted();
    this.columnsAhead.drop();
  }

  /** Stops making memory ahead, for good; the timers stay readable. */
  close(): void {
    this.arena.close();
    this.columnsAhead.close();
  }
}
