// When each ADD record was accepted (its header's accepted-at-ms, docs/format/engine-records.md),
// by its sequence: what a timer's view shows as `created_at`. Main thread, part of the engine's
// state.
//
// One entry per ADD record (OUTCOME_FOLLOWED's ADD part too), not per timer: a batch's timers
// share it. Entries are appended in sequence order as ADDs are applied, live and in replay, and
// looked up by bisection. A checkpoint truncates the ADD records it covers, so it keeps the
// entries of those that still hold a timer in its manifest (docs/format/spill.md, "addTimes") and
// drops the others from memory; a manifest from before the field gives none, and a timer whose
// entry is unknown shows `created_at: null`.
//
//   seqs  [  3,   9,  12, …]   ascending
//   times [t3,  t9, t12, …]   epoch ms
//
// Which entries are kept: those of ADDs with a RESIDENT timer, so the table is bounded by what is
// in memory. A resident timer's slot names its sequence, so the checkpoint keeps those and drops
// the rest; a timer it spills takes its entry with it, as its run row's `created_at`
// (docs/format/spill.md), and the entry comes back here when the timer comes back into memory
// (promotion, or a PATCH or cancel of it: spill/restore.ts insertRunRow). Such a comeback brings
// an old sequence, behind the table's end: it waits in a small map of late entries, merged into
// the columns at the next checkpoint, so no insert moves the columns. Its memory is counted in
// /v1/stats (memory.add_times_bytes).
import type { ResidentStore } from './store/resident-store.ts';
import { timerState } from './store/timer-state.ts';

/** The table as the manifest keeps it: entry i at index i of each, seqs ascending. */
export interface AddTimeColumns {
  readonly seqs: Float64Array;
  readonly acceptedAtMs: Float64Array;
}

export const noAddTimes: AddTimeColumns = { seqs: new Float64Array(0), acceptedAtMs: new Float64Array(0) };

/** What a checkpoint takes from the table: the manifest's entries, and those of the timers it spills (for their runs). */
export interface AddTimesCheckpoint {
  /** Entries up to the covered sequence held by a timer that stays resident. */
  readonly kept: AddTimeColumns;
  /** Entries held by a timer being spilled (some also in `kept`): its run row's created_at. */
  readonly spilling: AddTimeColumns;
}

/** Bytes an entry's room takes in the columns: its seq and time (f64 each). */
const entryBytes = 16;
/**
 * Bytes a late entry takes in its Map: 53 measured on Node 26 (10^5 entries of a seq and an
 * epoch-ms time, heap used after a gc, over their count; the time is a boxed double), rounded up.
 */
const lateEntryBytes = 56;

export class AddTimes {
  #seqs = new Float64Array(64);
  #times = new Float64Array(64);
  #size = 0;
  /** Entries behind the columns' end (a timer brought back into memory), until the next checkpoint merges them. */
  #late = new Map<number, number>();

  get size(): number {
    return this.#size + this.#late.size;
  }

  /** Memory the table takes: its columns' room and its late entries. */
  get bytesUsed(): number {
    return this.#seqs.length * entryBytes + this.#late.size * lateEntryBytes;
  }

  /** Records when ADD `seq` was accepted; a sequence already known is left as it is. */
  add(seq: number, acceptedAtMs: number): void {
    const at = this.#size;
    if (at > 0 && (this.#seqs[at - 1] as number) >= seq) {
      // An admit that resolves after a later one's, or a timer back from a run.
      if (this.#indexOf(seq) < 0 && !this.#late.has(seq)) this.#late.set(seq, acceptedAtMs);
      return;
    }
    if (this.#size === this.#seqs.length) this.#grow(this.#size * 2);
    this.#seqs[at] = seq;
    this.#times[at] = acceptedAtMs;
    this.#size++;
  }

  /** When ADD `seq` was accepted (epoch ms), or null when unknown. */
  acceptedAtOf(seq: number): number | null {
    const at = this.#indexOf(seq);
    if (at >= 0) return this.#times[at] as number;
    return this.#late.size === 0 ? null : (this.#late.get(seq) ?? null);
  }

  /**
   * At a checkpoint covering the log up to `coveredSeq`, in the turn it snapshots the store:
   * keeps the entries up to it that a timer staying resident holds (and every later one), drops
   * the others, and gives the ones kept up to it (for the manifest) and those the spilled
   * timers hold (for their runs). `spilling[slot]` is 1 for a timer this checkpoint spills.
   */
  checkpoint(store: ResidentStore, spilling: Uint8Array, coveredSeq: number): AddTimesCheckpoint {
    this.#mergeLate();
    // 1: a resident timer holds the entry; 2: a spilled one; 3: both.
    const held = new Uint8Array(this.#size);
    const { logSeq, state } = store;
    let lastSeq = -1;
    let lastAt = -1;
    let spilledEntries = 0;
    for (let slot = 0; slot < store.capacity; slot++) {
      if (state[slot] === timerState.free) continue;
      const seq = logSeq[slot] as number;
      // A batch's timers sit in neighbouring slots: most look-ups are the one before's.
      if (seq !== lastSeq) {
        lastSeq = seq;
        lastAt = this.#indexOf(seq);
      }
      if (lastAt < 0) continue;
      const mark = spilling[slot] === 1 ? 2 : 1;
      if (mark === 2 && (held[lastAt] as number) < 2) spilledEntries++;
      held[lastAt] = (held[lastAt] as number) | mark;
    }
    const spilledSeqs = new Float64Array(spilledEntries);
    const spilledTimes = new Float64Array(spilledEntries);
    let kept = 0;
    let coveredKept = 0;
    for (let i = 0, k = 0; i < this.#size; i++) {
      const seq = this.#seqs[i] as number;
      const hold = held[i] as number;
      if (hold >= 2) {
        spilledSeqs[k] = seq;
        spilledTimes[k++] = this.#times[i] as number;
      }
      if (seq <= coveredSeq && (hold & 1) === 0) continue;
      if (seq <= coveredSeq) coveredKept++;
      this.#seqs[kept] = seq;
      this.#times[kept] = this.#times[i] as number;
      kept++;
    }
    this.#size = kept;
    if (this.#seqs.length > 64 && kept * 4 < this.#seqs.length) this.#grow(Math.max(64, kept * 2));
    return {
      kept: { seqs: this.#seqs.slice(0, coveredKept), acceptedAtMs: this.#times.slice(0, coveredKept) },
      spilling: { seqs: spilledSeqs, acceptedAtMs: spilledTimes },
    };
  }

  /** At open, before replay: the entries a manifest kept. */
  restore(columns: AddTimeColumns): void {
    const count = columns.seqs.length;
    this.#size = 0;
    this.#late.clear();
    this.#grow(Math.max(64, count * 2));
    this.#seqs.set(columns.seqs);
    this.#times.set(columns.acceptedAtMs);
    this.#size = count;
  }

  /** The late entries into the columns, all in sequence order again. */
  #mergeLate(): void {
    if (this.#late.size === 0) return;
    const late = [...this.#late.keys()].sort((a, b) => a - b);
    const total = this.#size + late.length;
    const seqs = new Float64Array(Math.max(64, total * 2));
    const times = new Float64Array(seqs.length);
    for (let i = 0, j = 0, k = 0; k < total; k++) {
      if (j < late.length && (i === this.#size || (late[j] as number) < (this.#seqs[i] as number))) {
        const seq = late[j++] as number;
        seqs[k] = seq;
        times[k] = this.#late.get(seq) as number;
      } else {
        seqs[k] = this.#seqs[i] as number;
        times[k] = this.#times[i++] as number;
      }
    }
    this.#seqs = seqs;
    this.#times = times;
    this.#size = total;
    this.#late.clear();
  }

  /** Where `seq` is in the columns, or -1. */
  #indexOf(seq: number): number {
    let lo = 0;
    let hi = this.#size;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.#seqs[mid] as number) < seq) lo = mid + 1;
      else hi = mid;
    }
    return lo < this.#size && this.#seqs[lo] === seq ? lo : -1;
  }

  #grow(capacity: number): void {
    const seqs = new Float64Array(capacity);
    const times = new Float64Array(capacity);
    seqs.set(this.#seqs.subarray(0, this.#size));
    times.set(this.#times.subarray(0, this.#size));
    this.#seqs = seqs;
    this.#times = times;
  }
}

/** When ADD `seq` was accepted per `columns` (a checkpoint's `spilling`), NaN when it is not there. */
export function acceptedAtIn(columns: AddTimeColumns, seq: number): number {
  let lo = 0;
  let hi = columns.seqs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((columns.seqs[mid] as number) < seq) lo = mid + 1;
    else hi = mid;
  }
  return columns.seqs[lo] === seq ? (columns.acceptedAtMs[lo] as number) : NaN;
}
