// Which slots of the resident store (resident-store.ts) a new timer may take: those at and past
// the high-water mark were never used, and released ones wait on a stack to be taken again.
// While a snapshot is held (a checkpoint reading its timers' fixed fields over several turns),
// released slots are set aside instead, and come back when the last snapshot is released. The
// generation a slot takes when first used is kept here too: above every handle given out before
// the last shrink. Owned by the store, on the main thread: only the store holds this object.
//
//   stack      [ 4, 1 ]   ← released slots; a batch takes the top k in the order they were pushed,
//                          so slots released in order are taken again in order (runs for the heap)
//   highWater  6          ← slots 6 … capacity-1 were never used (their generation is still 0)
import { widened } from './column-growth.ts';

const stackInitial = 64;

export class FreeSlots {
  /** Slots at and above this were never allocated. */
  highWater = 0;
  /** The generation a slot takes when first used. */
  generationFloor = 1;
  #stack = new Int32Array(stackInitial);
  #count = 0;
  /** Snapshots not yet released; while any is, released slots wait in #setAside. */
  #snapshotsHeld = 0;
  #setAside: number[] = [];

  /** Released slots ready to be taken again. */
  get count(): number {
    return this.#count;
  }

  /** The stack itself, read after takeTop(); replaced when it grows. */
  get stack(): Int32Array {
    return this.#stack;
  }

  /** Whether a snapshot is held (its slots must keep their numbers and fixed fields). */
  get snapshotHeld(): boolean {
    return this.#snapshotsHeld > 0;
  }

  /** Bytes of the stack (it grows with releases, not with capacity). */
  get bytesUsed(): number {
    return this.#stack.byteLength;
  }

  /** The slot released last, taken off the stack; -1 when none waits. */
  pop(): number {
    return this.#count > 0 ? (this.#stack[--this.#count] as number) : -1;
  }

  /** Takes the top `n` (≤ count) released slots: stack[from … from + n), in the order they were pushed. Returns from. */
  takeTop(n: number): number {
    this.#count -= n;
    return this.#count;
  }

  /** A slot released: back on the stack, or set aside while a snapshot is held. */
  free(slot: number): void {
    if (this.#snapshotsHeld > 0) this.#setAside.push(slot);
    else this.#push(slot);
  }

  snapshotTaken(): void {
    this.#snapshotsHeld++;
  }

  snapshotReleased(): void {
    this.#snapshotsHeld--;
    if (this.#snapshotsHeld > 0) return;
    for (const slot of this.#setAside) this.#push(slot);
    this.#setAside = [];
  }

  /** After a shrink: the `live` timers fill the lowest slots, none is free, and new slots start at `generationFloor`. */
  restart(live: number, generationFloor: number): void {
    this.highWater = live;
    this.generationFloor = generationFloor;
    this.#stack = new Int32Array(stackInitial);
    this.#count = 0;
  }

  #push(slot: number): void {
    if (this.#count === this.#stack.length) this.#stack = widened(this.#stack, this.#stack.length * 2, (n) => new Int32Array(n));
    this.#stack[this.#count++] = slot;
  }
}
