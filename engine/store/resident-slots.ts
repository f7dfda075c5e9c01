// The resident store's slots (resident-store.ts): which hold a timer and the handles that name
// them, and where the next timer goes: a released slot, or a new one past the high-water mark,
// growing the columns (resident-columns.ts) up to capacityMax, or past it while a log is
// replayed. The columns of a growth to come may be made ahead (../memory/columns-ahead.ts),
// asked for here. The store extends this class; main thread.
//
//   handle = generation · 2^28 + slot      a released slot's generation is bumped, so a handle
//                                          kept from before answers -1 (slotOf)
//   capacity ≤ capacityMax                 (≤ residentCapacityLimit while replaying)
import assert from 'node:assert/strict';
import type { ColumnsAheadOptions } from '../memory/columns-ahead.ts';
import { capacityTowards, doubledCapacity } from './column-growth.ts';
import { FreeSlots } from './free-slots.ts';
import { ResidentColumns } from './resident-columns.ts';
import { type IndexColumn, type IndexColumnKind, residentCapacityLimit, residentSlotSpan } from './resident-layout.ts';
import { timerState } from './timer-state.ts';

export class ResidentSlots extends ResidentColumns {
  /** Which slots are free (free-slots.ts). */
  protected readonly freeSlots = new FreeSlots();
  #capacityMax: number;
  /** While a log is replayed, growth may pass capacityMax (beginReplay). */
  #replaying = false;

  protected constructor(capacity: number, capacityMax: number, aheadOptions: ColumnsAheadOptions) {
    super(capacity, aheadOptions);
    this.#capacityMax = capacityMax;
  }

  /** Slots at or past this were never used: a pass over every live timer stops here. */
  get slotsUsed(): number {
    return this.freeSlots.highWater;
  }

  /** Live timers at most: allocate() answers -1 past it (the caller refuses adds with CAPACITY_FULL). */
  get capacityMax(): number {
    return this.#capacityMax;
  }

  /** Slots the columns hold now; grows by doubling up to capacityMax. */
  get capacity(): number {
    return this.columnCapacity;
  }

  /**
   * From here until endReplay(), the store grows past capacityMax (up to what a handle
   * addresses): a log replayed at open may hold more timers than this life's limit (a restart
   * with a smaller memory budget, on a smaller machine), and every one of them must come back.
   */
  beginReplay(): void {
    this.#replaying = true;
  }

  /** Ends beginReplay(): capacityMax rises to the slots the replay took, if it passed it. */
  endReplay(): void {
    this.#replaying = false;
    this.#capacityMax = Math.max(this.#capacityMax, this.columnCapacity);
  }

  #limit(): number {
    return this.#replaying ? residentCapacityLimit : this.#capacityMax;
  }

  /** The capacity a growth to hold `needed` slots may reach: past capacityMax only when a replay needs more. */
  #growthCap(needed: number): number {
    return this.#replaying && needed > this.#capacityMax ? residentCapacityLimit : this.#capacityMax;
  }

  isLive(slot: number): boolean {
    // Out of range, negative or fractional slots read undefined: not live.
    return (this.stateColumn[slot] ?? timerState.free) !== timerState.free;
  }

  handleOf(slot: number): number {
    this.assertLive(slot);
    return (this.generationColumn[slot] as number) * residentSlotSpan + slot;
  }

  /** The slot a handle names, or -1 if that timer was released (whatever took the slot since). */
  slotOf(handle: number): number {
    if (!Number.isSafeInteger(handle) || handle < 0) return -1;
    const slot = handle % residentSlotSpan;
    const generation = (handle - slot) / residentSlotSpan;
    if (!this.isLive(slot) || this.generationColumn[slot] !== generation) return -1;
    return slot;
  }

  protected assertLive(slot: number): void {
    // A plain condition, assert only on failure: assert.ok's rest arguments cost an array per call, on per-timer paths.
    if (!this.isLive(slot)) assert.fail('slot is not live: released twice, or never allocated');
  }

  /** Whether `n` more allocations would succeed (a batch is admitted whole or not at all). */
  canAllocate(n: number): boolean {
    return n <= this.freeSlots.count + (this.#limit() - this.freeSlots.highWater);
  }

  /** A slot for one new timer: the last released, else a new one (growing the columns); -1 when capacityMax slots are live. */
  protected takeSlot(): number {
    const slots = this.freeSlots;
    const released = slots.pop();
    if (released >= 0) return released;
    if (slots.highWater === this.columnCapacity) {
      if (this.columnCapacity === this.#limit()) return -1;
      this.growColumns(Math.min(this.columnCapacity * 2, this.#growthCap(slots.highWater + 1)));
    }
    const slot = slots.highWater++;
    this.generationColumn[slot] = slots.generationFloor;
    return slot;
  }

  /** The high-water mark `n` more allocations reach: released slots first, then new ones. */
  #slotsNeeded(n: number): number {
    return this.freeSlots.highWater + (n - this.freeSlots.count);
  }

  /** Grows the columns, if needed, so that `n` more allocations take slots without growing them. */
  reserve(n: number): void {
    const needed = this.#slotsNeeded(n);
    if (needed <= this.columnCapacity) return;
    assert.ok(needed <= this.#limit(), 'reserve beyond capacityMax');
    this.growColumns(Math.min(doubledCapacity(this.columnCapacity, needed), this.#growthCap(needed)));
  }

  /**
   * As reserve(n); but when the columns must grow, they grow to `expectedSlots` (what the
   * caller expects to hold in the end; at least what n needs) instead of doubling: one copy
   * into columns of the final size rather than a chain of copies, each into fresh memory.
   * Recovery does this while it replays the log, whose size tells how many timers are to come.
   * An expectation that falls short still grows them by half at least, so that a run of low
   * guesses cannot turn growth into a copy per batch.
   */
  reserveTowards(n: number, expectedSlots: number): void {
    const needed = this.#slotsNeeded(n);
    if (needed <= this.columnCapacity) return;
    assert.ok(needed <= this.#limit(), 'reserve beyond capacityMax');
    this.growColumns(Math.min(capacityTowards(this.columnCapacity, needed, expectedSlots), this.#growthCap(needed)));
  }

  /**
   * Says that about `rows` more timers are to be allocated soon (batches being logged): once
   * they near the capacity, the columns of the next growth are made ahead, their pages mapped
   * off the main thread (memory/columns-ahead.ts), so the growth is a copy and neither it nor
   * the rows that follow stop for page faults. A growth that comes before they are made
   * allocates its own, as without them. Columns made and not taken are let go once no call has
   * asked for them for a while, or by dropPrefaulted or close.
   */
  prefaultColumnsFor(rows: number): void {
    this.columnsAhead.rowsComing(rows, this.columnCapacity, this.capacityMax, this.freeSlots.highWater, this.freeSlots.count, this.indexColumns.length);
  }

  /**
   * While a log is replayed: the columns for `capacity` slots (what the replay expects the
   * store to end at) are made ahead, their pages mapped off the main thread, and kept for the
   * growth that needs them (memory/columns-ahead.ts's makeForReplay). Nothing when the columns
   * hold that many already.
   */
  prefaultColumnsForReplay(capacity: number): void {
    if (capacity <= this.columnCapacity) return;
    this.columnsAhead.makeForReplay(capacity, this.indexColumns.length);
  }

  /** Lets go of the columns made ahead (not the arena's slabs). */
  dropColumnsAhead(): void {
    this.columnsAhead.drop();
  }

  /**
   * When `rows` more allocations would grow the columns and the columns for that growth are
   * still being made ahead: a promise that settles once their making has ended (made, failed, or
   * dropped). Otherwise undefined, and the caller goes on at once. Made on the main thread
   * instead, the columns of a large growth stall it for their pages: 1.4–1.5 s for the 1,040 MiB
   * of 2^24 slots, in runs of 10,000-row Arrow batches whose fill outran the threadpool making
   * them (a million rows a second). An admit that waits leaves the main thread to everything
   * else meanwhile (deliveries, other requests).
   */
  columnsAheadPending(rows: number): Promise<void> | undefined {
    const needed = this.#slotsNeeded(rows);
    if (needed <= this.columnCapacity) return undefined;
    return this.columnsAhead.pending(needed, this.capacityMax);
  }

  /** Growths that took columns made ahead. */
  get columnGrowthsMadeAhead(): number {
    return this.columnsAhead.growthsMadeAhead;
  }

  /** Capacity of the columns being made ahead (0: none). */
  get columnsAheadCapacity(): number {
    return this.columnsAhead.capacity;
  }

  /** Whether columns made ahead are ready for the next growth to take. */
  get columnsAheadReady(): boolean {
    return this.columnsAhead.ready;
  }

  /** A new index column (zero, `capacity` long) that grows with the store's columns from now on. */
  indexColumn(holds: IndexColumnKind = 'bySlot'): IndexColumn {
    return this.addIndexColumn(holds);
  }
}
