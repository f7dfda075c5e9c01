// Chosen resident timers as they were at one instant, readable later: a checkpoint takes one
// between two macrotasks (the store then matches the log's last durable record exactly) and
// writes the timers into its runs over several turns while the store goes on changing. Main
// thread only; release() when done.
//
// Only the fields that change while a timer is live are copied at the instant (dueAt, state,
// attempts, last status: 13 bytes a timer). The others (log position, fire time, queue, target,
// bytes) never change while the slot holds that timer, and the store does not hand a slot out
// again while a snapshot of it is held (ResidentStore.release() sets it aside), so they are read
// from the store's columns when asked for. Copying all 13 columns at the instant held the event
// loop for 2 s at 12.6 million timers, most of it faulting in the fresh memory.
//
//   snapshot i ─► dueAt[i] state[i] attempts[i] lastStatus[i]     (copied: they may change)
//              └► slots[i] ─► the store's logSeq, row, fireAt, …  (fixed while held)
//                          └► bytes ref + lengths ─► ArenaHold.view (the bytes stay as they were)
import type { ArenaHold } from './byte-arena.ts';
import { callbacksRunBytesAt, callbacksRunHeaderBytes } from './callback-bytes.ts';

const noBytes = new Uint8Array(0);

/** The fields copied at the instant, by snapshot index. */
export interface StoreSnapshotColumns {
  readonly dueAt: Float64Array;
  readonly state: Uint8Array;
  readonly attempts: Uint16Array;
  readonly lastStatus: Uint16Array;
}

/** Where a snapshot reads the fields a live timer never changes: the store's columns, by slot. */
export interface SnapshotSource {
  readonly logSeq: ArrayLike<number>;
  readonly row: ArrayLike<number>;
  readonly fireAt: ArrayLike<number>;
  readonly queueIndex: ArrayLike<number>;
  readonly targetIndex: ArrayLike<number>;
  bytesRefOf(slot: number): number;
  payloadLengthOf(slot: number): number;
  headersLengthOf(slot: number): number;
  keyLengthOf(slot: number): number;
  hasCallbacks(slot: number): boolean;
}

export class StoreSnapshot {
  readonly count: number;
  /** The slot of each timer taken, by snapshot index. */
  readonly slots: Int32Array;
  readonly columns: StoreSnapshotColumns;
  readonly #source: SnapshotSource;
  /** The store's target table at the instant (an index may be reused afterwards). */
  readonly #targetNames: readonly (string | undefined)[];
  readonly #hold: ArenaHold;
  readonly #onRelease: () => void;
  #released = false;

  constructor(source: SnapshotSource, slots: Int32Array, columns: StoreSnapshotColumns, targetNames: readonly (string | undefined)[], hold: ArenaHold, onRelease: () => void) {
    this.count = slots.length;
    this.slots = slots;
    this.columns = columns;
    this.#source = source;
    this.#targetNames = targetNames;
    this.#hold = hold;
    this.#onRelease = onRelease;
  }

  logSeqOf(i: number): number {
    return this.#source.logSeq[this.slots[i] as number] as number;
  }

  rowOf(i: number): number {
    return this.#source.row[this.slots[i] as number] as number;
  }

  fireAtOf(i: number): number {
    return this.#source.fireAt[this.slots[i] as number] as number;
  }

  queueIndexOf(i: number): number {
    return this.#source.queueIndex[this.slots[i] as number] as number;
  }

  targetOf(i: number): string {
    return this.#targetNames[this.#source.targetIndex[this.slots[i] as number] as number] as string;
  }

  /** Payload, headers and key of timer i: views that are valid until release(). */
  payloadOf(i: number): Uint8Array {
    const slot = this.slots[i] as number;
    return this.#hold.view(this.#source.bytesRefOf(slot), this.#source.payloadLengthOf(slot));
  }

  headersOf(i: number): Uint8Array {
    const slot = this.slots[i] as number;
    const source = this.#source;
    return this.#hold.view(source.bytesRefOf(slot) + source.payloadLengthOf(slot), source.headersLengthOf(slot));
  }

  keyOf(i: number): Uint8Array {
    const slot = this.slots[i] as number;
    const source = this.#source;
    return this.#hold.view(source.bytesRefOf(slot) + source.payloadLengthOf(slot) + source.headersLengthOf(slot), source.keyLengthOf(slot));
  }

  /** Both callback URLs as one run (callback-bytes.ts; empty: none), read through the hold as the rest. */
  callbacksOf(i: number): Uint8Array {
    const slot = this.slots[i] as number;
    const source = this.#source;
    if (!source.hasCallbacks(slot)) return noBytes;
    const at = source.bytesRefOf(slot) + source.payloadLengthOf(slot) + source.headersLengthOf(slot) + source.keyLengthOf(slot);
    return this.#hold.view(at, callbacksRunBytesAt(this.#hold.view(at, callbacksRunHeaderBytes), 0));
  }

  /** Lets the arena reuse its space and the store its released slots again; nothing may be read afterwards. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#hold.release();
    this.#onRelease();
  }
}
