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
//   position   slot → its index in entries + 1, 0 when absent (removal and re-keying in O(log n))
//
// Both arrays are index columns of the store (resident-store.ts): as long as its capacity
// (a heap holds live slots only), zero when new, and grown with its columns, made ahead with
// them. The heap has no growth of its own to stop the main thread for fresh pages (growing
// both arrays to 2^22 slots took 137 ms of an Arrow admit here).
//
//                       s7
//                  ┌─────┴─────┐
//                 s2           s9
//               ┌──┴──┐
//              s4     s1
import assert from 'node:assert/strict';
import type { IndexColumn, ReadonlyColumn, ResidentStore } from './resident-store.ts';

/** removeMany and pushMany rebuild the heap when k sifts of log n steps would cost more than this many times n. */
const rebuildCostFactor = 4;
/** A position meaning "being removed" during removeMany (absent is 0). */
const removedMark = -1;

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

/** The columns of a heap never pushed to: nothing in them, nothing held for them. */
const noColumn = (): IndexColumn => ({ array: new Int32Array(0) });

export class TimerHeap {
  readonly #store: ResidentStore;
  /** The store's index columns from the first push on (a heap that stays empty costs nothing). */
  #entries = noColumn();
  /** Each slot's index in entries, plus one; 0 when it is not in the heap. */
  #positions = noColumn();
  #columnsTaken = false;
  #size = 0;

  constructor(store: ResidentStore) {
    this.#store = store;
  }

  get size(): number {
    return this.#size;
  }

  has(slot: number): boolean {
    const positions = this.#positions.array;
    return slot >= 0 && slot < positions.length && (positions[slot] as number) > 0;
  }

  push(slot: number): void {
    assert.ok(this.#store.isLive(slot), 'pushed a slot that is not live');
    this.#takeColumns();
    assert.ok(!this.has(slot), 'pushed a slot already in the heap');
    const at = this.#size++;
    this.#place(slot, at);
    this.#siftUp(at);
  }

  /**
   * Pushes slots[0..count), as that many push() calls would: a batch's new timers. When the
   * batch is large next to the heap (the first batches of a replay), the heap is rebuilt in
   * O(n) instead of sifting each entry up.
   */
  pushMany(slots: Int32Array, count: number): void {
    assert.ok(count <= slots.length, 'pushMany past the end of its slots');
    this.#takeColumns();
    const positions = this.#positions.array;
    const first = this.#size;
    for (let i = 0; i < count; i++) {
      const slot = slots[i] as number;
      // A plain condition per slot, assert only on failure (assert.ok's rest arguments cost an array per call).
      if (!this.#store.isLive(slot)) assert.fail('pushed a slot that is not live');
      if ((positions[slot] as number) > 0) assert.fail('pushed a slot already in the heap');
      this.#place(slot, this.#size++);
    }
    const rebuild = count * Math.log2(this.#size + 2) > rebuildCostFactor * this.#size;
    if (rebuild) for (let at = (this.#size >> 1) - 1; at >= 0; at--) this.#siftDown(at);
    else for (let at = first; at < this.#size; at++) this.#siftUp(at);
  }

  /** The earliest slot, or -1 when empty. */
  peek(): number {
    return this.#size === 0 ? -1 : (this.#entries.array[0] as number);
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
    const entries = this.#entries.array;
    const slot = entries[0] as number;
    const last = entries[--this.#size] as number;
    this.#positions.array[slot] = 0;
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
    this.#removeAt((this.#positions.array[slot] as number) - 1);
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
    const entries = this.#entries.array;
    const positions = this.#positions.array;
    for (let i = 0; i < slots.length; i++) {
      const slot = slots[i] as number;
      if (!this.has(slot)) continue;
      positions[slot] = removedMark;
      removed++;
    }
    let kept = 0;
    for (let i = 0; i < this.#size; i++) {
      const slot = entries[i] as number;
      if (positions[slot] === removedMark) positions[slot] = 0;
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
    const at = (this.#positions.array[slot] as number) - 1;
    if (this.#siftUp(at) === at) this.#siftDown(at);
  }

  /** Checks the heap property and the position index in O(n + capacity); for tests. */
  assertValid(): void {
    const { dueAt, logSeq, row } = this.#store;
    const entries = this.#entries.array;
    const positions = this.#positions.array;
    for (let i = 0; i < this.#size; i++) {
      const slot = entries[i] as number;
      assert.ok(this.#store.isLive(slot), `slot ${slot} in the heap was released`);
      assert.equal(positions[slot], i + 1, `position of slot ${slot} is not ${i}`);
      const parent = (i - 1) >> 1;
      if (i > 0) assert.ok(!dueBefore(dueAt, logSeq, row, slot, entries[parent] as number), `entry ${i} is due before its parent`);
    }
    let present = 0;
    for (let slot = 0; slot < positions.length; slot++) if ((positions[slot] as number) > 0) present++;
    assert.equal(present, this.#size, 'position index and entries disagree on the size');
  }

  #takeColumns(): void {
    if (this.#columnsTaken) return;
    this.#columnsTaken = true;
    this.#entries = this.#store.indexColumn();
    this.#positions = this.#store.indexColumn();
  }

  #place(slot: number, at: number): void {
    this.#entries.array[at] = slot;
    this.#positions.array[slot] = at + 1;
  }

  #removeAt(at: number): void {
    const entries = this.#entries.array;
    const slot = entries[at] as number;
    const last = entries[--this.#size] as number;
    this.#positions.array[slot] = 0;
    if (at === this.#size) return;
    this.#place(last, at);
    if (this.#siftUp(at) === at) this.#siftDown(at);
  }

  /** Moves the entry at `at` up while it is due before its parent; returns where it ends. */
  #siftUp(at: number): number {
    const { dueAt, logSeq, row } = this.#store;
    const entries = this.#entries.array;
    const slot = entries[at] as number;
    while (at > 0) {
      const parentAt = (at - 1) >> 1;
      const parent = entries[parentAt] as number;
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
    const entries = this.#entries.array;
    const slot = entries[at] as number;
    for (;;) {
      const leftAt = 2 * at + 1;
      if (leftAt >= this.#size) break;
      const rightAt = leftAt + 1;
      let childAt = leftAt;
      if (rightAt < this.#size && dueBefore(dueAt, logSeq, row, entries[rightAt] as number, entries[leftAt] as number)) {
        childAt = rightAt;
      }
      const child = entries[childAt] as number;
      if (!dueBefore(dueAt, logSeq, row, child, slot)) break;
      this.#place(child, at);
      at = childAt;
    }
    this.#place(slot, at);
  }
}
