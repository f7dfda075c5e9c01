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
// Which entries hold a timer: a resident timer's slot names its sequence, so the checkpoint marks
// those; a spilled timer is not in memory, so an entry one of its timers spilled from (or one
// restored from a manifest, which may be such) is kept while anything at all is spilled. Its
// memory is counted in /v1/stats (memory.add_times_bytes).
import type { ResidentStore } from './store/resident-store.ts';
import { timerState } from './store/timer-state.ts';

/** The table as the manifest keeps it: entry i at index i of each, seqs ascending. */
export interface AddTimeColumns {
  readonly seqs: Float64Array;
  readonly acceptedAtMs: Float64Array;
}

export const noAddTimes: AddTimeColumns = { seqs: new Float64Array(0), acceptedAtMs: new Float64Array(0) };

/** Bytes an entry's room takes: its seq and time (f64 each) and its spilled mark (u8). */
const entryBytes = 17;

export class AddTimes {
  #seqs = new Float64Array(64);
  #times = new Float64Array(64);
  /** 1: a timer of this ADD may be spilled (or the entry came from a manifest): kept while anything is spilled. */
  #mayBeSpilled = new Uint8Array(64);
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** Memory the table's columns take. */
  get bytesUsed(): number {
    return this.#seqs.length * entryBytes;
  }

  /** Records when ADD `seq` was accepted; a sequence already known is left as it is. */
  add(seq: number, acceptedAtMs: number): void {
    let at = this.#size;
    // Appends in sequence order; an admit that resolves after a later one's goes in its place.
    if (at > 0 && (this.#seqs[at - 1] as number) >= seq) {
      at = this.#lowerBound(seq);
      if (this.#seqs[at] === seq) return;
    }
    if (this.#size === this.#seqs.length) this.#grow(this.#size * 2);
    this.#seqs.copyWithin(at + 1, at, this.#size);
    this.#times.copyWithin(at + 1, at, this.#size);
    this.#mayBeSpilled.copyWithin(at + 1, at, this.#size);
    this.#seqs[at] = seq;
    this.#times[at] = acceptedAtMs;
    this.#mayBeSpilled[at] = 0;
    this.#size++;
  }

  /** When ADD `seq` was accepted (epoch ms), or null when unknown. */
  acceptedAtOf(seq: number): number | null {
    const at = this.#lowerBound(seq);
    return at < this.#size && this.#seqs[at] === seq ? (this.#times[at] as number) : null;
  }

  /**
   * At a checkpoint covering the log up to `coveredSeq`, in the turn it snapshots the store:
   * drops the entries up to it that no timer holds now (see above) and gives the ones left up to
   * it, for the manifest. `spilling[slot]` is 1 for a timer this checkpoint spills;
   * `anySpilled`: whether the runs it keeps or writes hold any timer.
   */
  checkpoint(store: ResidentStore, spilling: Uint8Array, coveredSeq: number, anySpilled: boolean): AddTimeColumns {
    const held = new Uint8Array(this.#size);
    const { logSeq, state } = store;
    let lastSeq = -1;
    let lastAt = -1;
    for (let slot = 0; slot < store.capacity; slot++) {
      if (state[slot] === timerState.free) continue;
      const seq = logSeq[slot] as number;
      // A batch's timers sit in neighbouring slots: most look-ups are the one before's.
      if (seq !== lastSeq) {
        lastSeq = seq;
        const at = this.#lowerBound(seq);
        lastAt = at < this.#size && this.#seqs[at] === seq ? at : -1;
      }
      if (lastAt < 0) continue;
      held[lastAt] = 1;
      if (spilling[slot] === 1) this.#mayBeSpilled[lastAt] = 1;
    }
    let kept = 0;
    let coveredKept = 0;
    for (let i = 0; i < this.#size; i++) {
      const seq = this.#seqs[i] as number;
      const keep = seq > coveredSeq || held[i] === 1 || (anySpilled && this.#mayBeSpilled[i] === 1);
      if (!keep) continue;
      if (seq <= coveredSeq) coveredKept++;
      this.#seqs[kept] = seq;
      this.#times[kept] = this.#times[i] as number;
      this.#mayBeSpilled[kept] = anySpilled ? (this.#mayBeSpilled[i] as number) : 0;
      kept++;
    }
    this.#size = kept;
    if (this.#seqs.length > 64 && kept * 4 < this.#seqs.length) this.#grow(Math.max(64, kept * 2));
    return { seqs: this.#seqs.slice(0, coveredKept), acceptedAtMs: this.#times.slice(0, coveredKept) };
  }

  /** At open, before replay: the entries a manifest kept (each may belong to a spilled timer). */
  restore(columns: AddTimeColumns): void {
    const count = columns.seqs.length;
    this.#size = 0;
    this.#grow(Math.max(64, count * 2));
    this.#seqs.set(columns.seqs);
    this.#times.set(columns.acceptedAtMs);
    this.#mayBeSpilled.fill(1, 0, count);
    this.#size = count;
  }

  #lowerBound(seq: number): number {
    let lo = 0;
    let hi = this.#size;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.#seqs[mid] as number) < seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  #grow(capacity: number): void {
    const seqs = new Float64Array(capacity);
    const times = new Float64Array(capacity);
    const marks = new Uint8Array(capacity);
    seqs.set(this.#seqs.subarray(0, this.#size));
    times.set(this.#times.subarray(0, this.#size));
    marks.set(this.#mayBeSpilled.subarray(0, this.#size));
    this.#seqs = seqs;
    this.#times = times;
    this.#mayBeSpilled = marks;
  }
}
