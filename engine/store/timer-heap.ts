// A binary min-heap of resident slots, earliest first by (dueAt, logSeq, row), with the slot
// number breaking any remaining tie so the order is total. Owned by the main thread, next to
// the ResidentStore whose columns it reads. This is the simple, obviously correct index: a
// faster one (a timing wheel) is tested against it, so clarity wins over speed here.
//
// The heap holds slot numbers only; keys are read from the store's columns at each comparison,
// so after store.setDueAt(slot, …) the heap must be told with update(slot).
//
//   entries    [ s7 | s2 | s9 | s4 | s1 | … ]    entries[i] is due no later than entries[2i+1]
//                 0    1    2    3    4            and entries[2i+2]
//   position   slot → its index in entries, -1 when absent (removal and re-keying in O(log n))
//
//                       s7
//                  ┌─────┴─────┐
//                 s2           s9
//               ┌──┴──┐
//              s4     s1
import assert from 'node:assert/strict';
import type { ReadonlyColumn, ResidentStore } from './resident-store.ts';

export const timerHeapCapacityInitialDefault = 1024;
/** removeMany and pushMany rebuild the heap when k sifts of log n steps would cost more than this many times n. */
const rebuildCostFactor = 4;
/** A position meaning "being removed" during removeMany (absent is -1). */
const removedMark = -2;

/** Whether slot `a` is due before slot `b`. */
function dueBefore(dueAt: ReadonlyColumn, logSeq: ReadonlyColumn, row: ReadonlyColumn, a: number, b: number): boolean {
  const dueA = dueAt[a] as number;
  const dueB = dueAt[b] as number;
  if (dueA !== dueB) return dueA < dueB;
  const seqA = logSeq[a] as number;
  const seqB = logSeq[b] as number;
  if (seqA !== seqB) return seqA < seqB;
  const rowA = row[a] as number;
  const rowB = row[b] as number;
  if (rowA !== rowB) return rowA < rowB;
  return a < b;
}

export class TimerHeap {
  readonly #store: ResidentStore;
  #entries: Int32Array;
  #position: Int32Array;
  #size = 0;

  constructor(store: ResidentStore, capacityInitial: number = timerHeapCapacityInitialDefault) {
    assert.ok(Number.isSafeInteger(capacityInitial) && capacityInitial >= 1, 'capacityInitial must be a positive integer');
    this.#store = store;
    this.#entries = new Int32Array(capacityInitial);
    this.#position = new Int32Array(store.capacity).fill(-1);
  }

  get size(): number {
    return this.#size;
  }

  /** Bytes held by the heap's two arrays (for stats). */
  get bytesUsed(): number {
    return this.#entries.byteLength + this.#position.byteLength;
  }

  has(slot: number): boolean {
    return slot >= 0 && slot < this.#position.length && (this.#position[slot] as number) >= 0;
  }

  push(slot: number): void {
    assert.ok(this.#store.isLive(slot), 'pushed a slot that is not live');
    if (slot >= this.#position.length) this.#growPosition();
    assert.ok(!this.has(slot), 'pushed a slot already in the heap');
    if (this.#size === this.#entries.length) this.#growEntries();
    const at = this.#size++;
    this.#place(slot, at);
    this.#siftUp(at);
  }

  /**
   * Pushes slots[0..count), as that many push() calls would: a batch's new timers. The arrays
   * grow once; when the batch is large next to the heap (the first batches of a replay), the
   * heap is rebuilt in O(n) instead of sifting each entry up.
   */
  pushMany(slots: Int32Array, count: number): void {
    assert.ok(count <= slots.length, 'pushMany past the end of its slots');
    if (this.#store.capacity > this.#position.length) this.#growPosition();
    while (this.#size + count > this.#entries.length) this.#growEntries();
    const position = this.#position;
    const first = this.#size;
    for (let i = 0; i < count; i++) {
      const slot = slots[i] as number;
      // A plain condition per slot, assert only on failure (assert.ok's rest arguments cost an array per call).
      if (!this.#store.isLive(slot)) assert.fail('pushed a slot that is not live');
      if ((position[slot] as number) >= 0) assert.fail('pushed a slot already in the heap');
      this.#place(slot, this.#size++);
    }
    const rebuild = count * Math.log2(this.#size + 2) > rebuildCostFactor * this.#size;
    if (rebuild) for (let at = (this.#size >> 1) - 1; at >= 0; at--) this.#siftDown(at);
    else for (let at = first; at < this.#size; at++) this.#siftUp(at);
  }

  /** The earliest slot, or -1 when empty. */
  peek(): number {
    return this.#size === 0 ? -1 : (this.#entries[0] as number);
  }

  /**
   * Removes and returns the earliest slot, or -1 when empty. Floyd's bottom-up removal: the
   * hole at the root goes down to a leaf along the earlier child (one comparison a level), and
   * the last entry, put there, sifts up (rarely far: it came from the bottom). About half the
   * comparisons of sifting the last entry down from the root, each a few reads of slots spread
   * over the store's columns.
   */
  pop(): number {
    if (this.#size === 0) return -1;
    const entries = this.#entries;
    const slot = entries[0] as number;
    const last = entries[--this.#size] as number;
    this.#position[slot] = -1;
    if (this.#size === 0) return slot;
    const { dueAt, logSeq, row } = this.#store;
    const size = this.#size;
    let at = 0;
    for (;;) {
      const leftAt = 2 * at + 1;
      if (leftAt >= size) break;
      const rightAt = leftAt + 1;
      const childAt = rightAt < size && dueBefore(dueAt, logSeq, row, entries[rightAt] as number, entries[leftAt] as number) ? rightAt : leftAt;
      this.#place(entries[childAt] as number, at);
      at = childAt;
    }
    this.#place(last, at);
    this.#siftUp(at);
    return slot;
  }

  /** Removes `slot`; false if it was not in the heap. */
  remove(slot: number): boolean {
    if (!this.has(slot)) return false;
    this.#removeAt(this.#position[slot] as number);
    return true;
  }

  /**
   * Removes every slot of `slots` that is in the heap; how many. Many at once (a checkpoint
   * evicting the timers it spilled) rebuild the heap in O(n) instead of k removals of O(log n).
   */
  removeMany(slots: ArrayLike<number>): number {
    // A removal sifts through about log n levels, several comparisons each; a rebuild visits
    // every entry once or twice.
    const rebuild = slots.length * Math.log2(this.#size + 2) > rebuildCostFactor * this.#size;
    let removed = 0;
    if (!rebuild) {
      for (let i = 0; i < slots.length; i++) if (this.remove(slots[i] as number)) removed++;
      return removed;
    }
    for (let i = 0; i < slots.length; i++) {
      const slot = slots[i] as number;
      if (!this.has(slot)) continue;
      this.#position[slot] = removedMark;
      removed++;
    }
    let kept = 0;
    for (let i = 0; i < this.#size; i++) {
      const slot = this.#entries[i] as number;
      if (this.#position[slot] === removedMark) this.#position[slot] = -1;
      else this.#place(slot, kept++);
    }
    this.#size = kept;
    // Floyd's heap construction: sift down every parent, the last first.
    for (let at = (kept >> 1) - 1; at >= 0; at--) this.#siftDown(at);
    return removed;
  }

  /** Restores the order after the slot's dueAt changed in the store. */
  update(slot: number): void {
    assert.ok(this.has(slot), 'updated a slot not in the heap');
    const at = this.#position[slot] as number;
    if (this.#siftUp(at) === at) this.#siftDown(at);
  }

  /** Checks the heap property and the position index in O(n + capacity); for tests. */
  assertValid(): void {
    const { dueAt, logSeq, row } = this.#store;
    for (let i = 0; i < this.#size; i++) {
      const slot = this.#entries[i] as number;
      assert.ok(this.#store.isLive(slot), `slot ${slot} in the heap was released`);
      assert.equal(this.#position[slot], i, `position of slot ${slot} is not ${i}`);
      const parent = (i - 1) >> 1;
      if (i > 0) assert.ok(!dueBefore(dueAt, logSeq, row, slot, this.#entries[parent] as number), `entry ${i} is due before its parent`);
    }
    let present = 0;
    for (let slot = 0; slot < this.#position.length; slot++) if ((this.#position[slot] as number) >= 0) present++;
    assert.equal(present, this.#size, 'position index and entries disagree on the size');
  }

  #place(slot: number, at: number): void {
    this.#entries[at] = slot;
    this.#position[slot] = at;
  }

  #removeAt(at: number): void {
    const slot = this.#entries[at] as number;
    const last = this.#entries[--this.#size] as number;
    this.#position[slot] = -1;
    if (at === this.#size) return;
    this.#place(last, at);
    if (this.#siftUp(at) === at) this.#siftDown(at);
  }

  /** Moves the entry at `at` up while it is due before its parent; returns where it ends. */
  #siftUp(at: number): number {
    const { dueAt, logSeq, row } = this.#store;
    const slot = this.#entries[at] as number;
    while (at > 0) {
      const parentAt = (at - 1) >> 1;
      const parent = this.#entries[parentAt] as number;
      if (!dueBefore(dueAt, logSeq, row, slot, parent)) break;
      this.#place(parent, at);
      at = parentAt;
    }
    this.#place(slot, at);
    return at;
  }

  /** Moves the entry at `at` down while a child is due before it. */
  #siftDown(at: number): void {
    const { dueAt, logSeq, row } = this.#store;
    const slot = this.#entries[at] as number;
    for (;;) {
      const leftAt = 2 * at + 1;
      if (leftAt >= this.#size) break;
      const rightAt = leftAt + 1;
      let childAt = leftAt;
      if (rightAt < this.#size && dueBefore(dueAt, logSeq, row, this.#entries[rightAt] as number, this.#entries[leftAt] as number)) {
        childAt = rightAt;
      }
      const child = this.#entries[childAt] as number;
      if (!dueBefore(dueAt, logSeq, row, child, slot)) break;
      this.#place(child, at);
      at = childAt;
    }
    this.#place(slot, at);
  }

  #growEntries(): void {
    const next = new Int32Array(this.#entries.length * 2);
    next.set(this.#entries);
    this.#entries = next;
  }

  /** The store grew: cover its new slots. */
  #growPosition(): void {
    const next = new Int32Array(this.#store.capacity).fill(-1);
    next.set(this.#position);
    this.#position = next;
  }
}
