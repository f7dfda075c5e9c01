// The fields of chosen resident timers copied out at one instant, with a hold on the arena so
// their bytes can be read later: a checkpoint takes one between two macrotasks (the store then
// matches the log's last durable record exactly) and copies the timers into its runs over
// several turns while the store goes on changing. Main thread only; release() when done.
//
//   snapshot i ─► logSeq[i] row[i] fireAt[i] dueAt[i] state[i] … (copied: the slot may change)
//              └► bytesRef[i] + lengths ─► ArenaHold.view (the bytes stay as they were)
import type { ArenaHold } from './byte-arena.ts';

export interface StoreSnapshotColumns {
  readonly logSeq: Float64Array;
  readonly row: Uint32Array;
  readonly fireAt: Float64Array;
  readonly dueAt: Float64Array;
  readonly state: Uint8Array;
  readonly attempts: Uint16Array;
  readonly lastStatus: Uint16Array;
  readonly queueIndex: Uint16Array;
  readonly targetIndex: Uint32Array;
  readonly bytesRef: Float64Array;
  readonly payloadLength: Uint32Array;
  readonly headersLength: Uint16Array;
  readonly keyLength: Uint16Array;
  /** The store's target table at the instant (an index may be reused afterwards). */
  readonly targetNames: readonly (string | undefined)[];
}

export class StoreSnapshot {
  readonly count: number;
  readonly columns: StoreSnapshotColumns;
  readonly #hold: ArenaHold;

  constructor(columns: StoreSnapshotColumns, hold: ArenaHold) {
    this.count = columns.logSeq.length;
    this.columns = columns;
    this.#hold = hold;
  }

  targetOf(i: number): string {
    return this.columns.targetNames[this.columns.targetIndex[i] as number] as string;
  }

  /** Payload, headers and key of timer i: views that are valid until release(). */
  payloadOf(i: number): Uint8Array {
    return this.#hold.view(this.columns.bytesRef[i] as number, this.columns.payloadLength[i] as number);
  }

  headersOf(i: number): Uint8Array {
    const { bytesRef, payloadLength, headersLength } = this.columns;
    return this.#hold.view((bytesRef[i] as number) + (payloadLength[i] as number), headersLength[i] as number);
  }

  keyOf(i: number): Uint8Array {
    const { bytesRef, payloadLength, headersLength, keyLength } = this.columns;
    return this.#hold.view((bytesRef[i] as number) + (payloadLength[i] as number) + (headersLength[i] as number), keyLength[i] as number);
  }

  /** Lets the arena reuse its space again; nothing may be read afterwards. */
  release(): void {
    this.#hold.release();
  }
}
