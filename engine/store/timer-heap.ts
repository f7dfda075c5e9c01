// A min-heap of resident slots, earliest first by (dueAt, logSeq, row), with the slot number
// breaking any remaining tie so the order is total. Owned by the main thread, next to the
// ResidentStore whose columns it reads.
//
// The heap holds slot numbers only; keys are read from the store's columns at each comparison,
// so after store.setDueAt(slot, …) the heap must be told with update(slot).
//
// Runs. Timers come in batches, and a batch's rows take consecutive slots in the order they
// fall due more often than not (10,000 rows for one fire time are one such run). A slot pushed
// while slot − 1 is in the heap and due before it *follows* slot − 1: it is not an entry of the
// binary heap, it waits behind slot − 1 and takes its place when that one leaves. The binary
// heap holds the head of every run, so popping is a merge of sorted runs: a head whose follower
// is next is replaced by it at the root, a comparison or two, instead of a descent of log n
// levels with three column reads a comparison when fire times tie. A run costs no memory: the
// mark is in the position column. The order handed out is the same as without runs.
//
//   entries    [ s7 | s2 | s9 | s4 | … ]  heads of runs: entries[i] is due no later than entries[2i+1] and entries[2i+2]
//                 0    1    2    3
//   position   slot → its index in entries + 1; followerMark when it follows slot − 1; 0 when absent
//
//   run of s2:  s2 ← s3 ← s4            position[s3] = position[s4] = followerMark
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
/** The position of a slot that follows slot − 1 in its run (absent is 0). */
const followerMark = -1;
/** Positions of slots being removed during removeMany, heads and followers. */
const removedHeadMark = -2;
const removedFollowerMark = -3;

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
const noColumn = (): IndexColumn => ({ array: new Int32Array(0), holds: 'bySlot' });

export class TimerHeap {
  readonly #store: ResidentStore;
  /** The store's index columns from the first push on (a heap that stays empty costs nothing). */
  #entries = noColumn();
  /** Each slot's index in entries plus one, followerMark, or 0 when it is not in the heap. */
  #positions = noColumn();
  #columnsTaken = false;
  /** Slots in the heap, heads and followers. */
  #size = 0;
  /** Entries of the binary heap: one per run. */
  #heads = 0;

  constructor(store: ResidentStore) {
    this.#store = store;
  }

  get size(): number {
    return this.#size;
  }

  /** Runs in the heap (entries of its binary heap); the other slots follow one of them. */
  get runs(): number {
    return this.#heads;
  }

  has(slot: number): boolean {
    const positions = this.#positions.array;
    return slot >= 0 && slot < positions.length && (positions[slot] as number) !== 0;
  }

  push(slot: number): void {
    assert.ok(this.#store.isLive(slot), 'pushed a slot that is not live');
    this.#takeColumns();
    assert.ok(!this.has(slot), 'pushed a slot already in the heap');
    this.#size++;
    if (this.#follows(slot)) {
      this.#positions.array[slot] = followerMark;
      return;
    }
    const at = this.#heads++;
    this.#place(slot, at);
    this.#siftUp(at);
  }

  /**
   * Pushes slots[0..count), as that many push() calls would: a batch's new timers. When the
   * runs they start are many next to the heap's (the first batches of a replay), the heap is
   * rebuilt in O(n) instead of sifting each up.
   */
  pushMany(slots: Int32Array, count: number): void {
    assert.ok(count <= slots.length, 'pushMany past the end of its slots');
    this.#takeColumns();
    const positions = this.#positions.array;
    const firstHead = this.#heads;
    for (let i = 0; i < count; i++) {
      const slot = slots[i] as number;
      // A plain condition per slot, assert only on failure (assert.ok's rest arguments cost an array per call).
      if (!this.#store.isLive(slot)) assert.fail('pushed a slot that is not live');
      if ((positions[slot] as number) !== 0) assert.fail('pushed a slot already in the heap');
      this.#size++;
      if (this.#follows(slot)) positions[slot] = followerMark;
      else this.#place(slot, this.#heads++);
    }
    const heads = this.#heads;
    const rebuild = (heads - firstHead) * Math.log2(heads + 2) > rebuildCostFactor * heads;
    if (rebuild) for (let at = (heads >> 1) - 1; at >= 0; at--) this.#siftDown(at);
    else for (let at = firstHead; at < heads; at++) this.#siftUp(at);
  }

  /** The earliest slot, or -1 when empty. */
  peek(): number {
    return this.#heads === 0 ? -1 : (this.#entries.array[0] as number);
  }

  /**
   * Removes and returns the earliest slot, or -1 when empty. A follower next in its run takes
   * the root and sifts down (due no earlier, it can only go down, and rarely far). Otherwise
   * Floyd's bottom-up removal: the hole at the root goes down to a leaf along the earlier child
   * (one comparison a level), and the last entry, put there, sifts up (rarely far: it came from
   * the bottom). About half the comparisons of sifting the last entry down from the root, each a
   * few reads of slots spread over the store's columns.
   */
  pop(): number {
    if (this.#heads === 0) return -1;
    const entries = this.#entries.array;
    const positions = this.#positions.array;
    const slot = entries[0] as number;
    positions[slot] = 0;
    this.#size--;
    const next = slot + 1;
    if (next < positions.length && positions[next] === followerMark) {
      this.#place(next, 0);
      this.#siftDown(0);
      return slot;
    }
    const last = entries[--this.#heads] as number;
    if (this.#heads === 0) return slot;
    const { dueAt, logSeq, row } = this.#store;
    const size = this.#heads;
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

  /**
   * Calls `visit` with the slots due before `untilMs`, `max` at most, in no set order, taking
   * none out: the entries below one due later are not looked at, nor the rest of its run.
   */
  visitDueBefore(untilMs: number, max: number, visit: (slot: number) => void): number {
    const entries = this.#entries.array;
    const positions = this.#positions.array;
    const dueAt = this.#store.dueAt;
    const stack = this.#heads === 0 ? [] : [0];
    let visited = 0;
    while (stack.length > 0 && visited < max) {
      const at = stack.pop() as number;
      for (let slot = entries[at] as number; visited < max && (dueAt[slot] as number) < untilMs; slot++) {
        visit(slot);
        visited++;
        if (slot + 1 >= positions.length || positions[slot + 1] !== followerMark) break;
      }
      if ((dueAt[entries[at] as number] as number) >= untilMs) continue;
      if (2 * at + 1 < this.#heads) stack.push(2 * at + 1);
      if (2 * at + 2 < this.#heads) stack.push(2 * at + 2);
    }
    return visited;
  }

  /** Removes `slot`; false if it was not in the heap. */
  remove(slot: number): boolean {
    if (!this.has(slot)) return false;
    const positions = this.#positions.array;
    const position = positions[slot] as number;
    positions[slot] = 0;
    this.#size--;
    const next = slot + 1;
    const followed = next < positions.length && positions[next] === followerMark;
    if (position === followerMark) {
      // The run is cut: what followed the slot heads a run of its own.
      if (followed) {
        const at = this.#heads++;
        this.#place(next, at);
        this.#siftUp(at);
      }
      return true;
    }
    const at = position - 1;
    if (followed) {
      // The follower takes the head's place, due no earlier than the head was: it can only go down.
      this.#place(next, at);
      this.#siftDown(at);
    } else this.#removeAt(at);
    return true;
  }

  /**
   * Removes every slot of `slots` that is in the heap; how many. Many at once (a checkpoint
   * evicting the timers it spilled) rebuild the heap in O(n) instead of k removals of O(log n).
   */
  removeMany(slots: ArrayLike<number>): number {
    // A removal sifts through about log n levels, several comparisons each; a rebuild visits
    // every slot once or twice.
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
      if (!(slot >= 0 && slot < positions.length)) continue;
      const position = positions[slot] as number;
      // Marked once: a slot named twice counts once.
      if (position > 0) positions[slot] = removedHeadMark;
      else if (position === followerMark) positions[slot] = removedFollowerMark;
      else continue;
      removed++;
    }
    // Each run walked from its head: removed slots leave it, and a kept slot after a removed
    // one heads a run of its own. Heads are gathered apart (there may be more than before).
    const heads = new Int32Array(this.#heads + removed);
    let kept = 0;
    for (let i = 0; i < this.#heads; i++) {
      let slot = entries[i] as number;
      let previousKept = false;
      for (;;) {
        const position = positions[slot] as number;
        if (position === removedHeadMark || position === removedFollowerMark) {
          positions[slot] = 0;
          previousKept = false;
        } else {
          if (!previousKept) heads[kept++] = slot;
          previousKept = true;
        }
        const next = slot + 1;
        if (next >= positions.length) break;
        const nextPosition = positions[next] as number;
        if (nextPosition !== followerMark && nextPosition !== removedFollowerMark) break;
        slot = next;
      }
    }
    for (let i = 0; i < kept; i++) this.#place(heads[i] as number, i);
    this.#heads = kept;
    this.#size -= removed;
    // Floyd's heap construction: sift down every parent, the last first.
    for (let at = (kept >> 1) - 1; at >= 0; at--) this.#siftDown(at);
    return removed;
  }

  /** Restores the order after the slot's dueAt changed in the store. */
  update(slot: number): void {
    assert.ok(this.has(slot), 'updated a slot not in the heap');
    // Its run may no longer be in order around it: taken out (which reads only other slots'
    // keys) and pushed again.
    this.remove(slot);
    this.push(slot);
  }

  /** Checks the heap property, the runs and the position index in O(n + capacity); for tests. */
  assertValid(): void {
    const { dueAt, logSeq, row } = this.#store;
    const entries = this.#entries.array;
    const positions = this.#positions.array;
    for (let i = 0; i < this.#heads; i++) {
      const slot = entries[i] as number;
      assert.ok(this.#store.isLive(slot), `slot ${slot} in the heap was released`);
      assert.equal(positions[slot], i + 1, `position of slot ${slot} is not ${i}`);
      const parent = (i - 1) >> 1;
      if (i > 0) assert.ok(!dueBefore(dueAt, logSeq, row, slot, entries[parent] as number), `entry ${i} is due before its parent`);
    }
    let present = 0;
    let heads = 0;
    for (let slot = 0; slot < positions.length; slot++) {
      const position = positions[slot] as number;
      if (position === 0) continue;
      present++;
      if (position > 0) {
        heads++;
        continue;
      }
      assert.equal(position, followerMark, `slot ${slot} has a stray position ${position}`);
      assert.ok(this.#store.isLive(slot), `slot ${slot} following in the heap was released`);
      assert.ok(slot > 0 && positions[slot - 1] !== 0, `slot ${slot} follows a slot not in the heap`);
      assert.ok(dueBefore(dueAt, logSeq, row, slot - 1, slot), `slot ${slot} is due before the slot it follows`);
    }
    assert.equal(heads, this.#heads, 'position index and entries disagree on the runs');
    assert.equal(present, this.#size, 'position index and the size disagree');
  }

  #takeColumns(): void {
    if (this.#columnsTaken) return;
    this.#columnsTaken = true;
    this.#entries = this.#store.indexColumn('slots');
    this.#positions = this.#store.indexColumn('bySlot');
  }

  /** Whether `slot`, being pushed, follows slot − 1: that one is in the heap (so it ends its run) and due before it. */
  #follows(slot: number): boolean {
    if (slot === 0 || this.#positions.array[slot - 1] === 0) return false;
    const { dueAt, logSeq, row } = this.#store;
    return dueBefore(dueAt, logSeq, row, slot - 1, slot);
  }

  #place(slot: number, at: number): void {
    this.#entries.array[at] = slot;
    this.#positions.array[slot] = at + 1;
  }

  /** Takes out the head entry at `at` (its position already cleared), whose run has nothing after it. */
  #removeAt(at: number): void {
    const entries = this.#entries.array;
    const last = entries[--this.#heads] as number;
    if (at === this.#heads) return;
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
    const size = this.#heads;
    for (;;) {
      const leftAt = 2 * at + 1;
      if (leftAt >= size) break;
      const rightAt = leftAt + 1;
      let childAt = leftAt;
      if (rightAt < size && dueBefore(dueAt, logSeq, row, entries[rightAt] as number, entries[leftAt] as number)) {
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
