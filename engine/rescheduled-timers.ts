// The timers a PATCH changed (engine/reschedule.ts): their revision and the fire time the
// latest PATCH gave them, by (ADD sequence, row). Main thread, part of the engine's state.
//
// Sparse on purpose: a timer never patched is revision 1 and fires at the time its id carries,
// so it has no entry and the paths every timer takes (admit, takeDue, deliveryInto, the store's
// columns, checkpoints of unpatched timers) do no work for this. An entry is also the redirect
// the spill tier needs: a timer's id names its ORIGINAL fire time (docs/format/ids.md), which
// stops naming its bucket once a PATCH moves it; placeOf() gives the time that does. Entries
// stay while the timer is spilled (a spilled run row carries the id's fire time and its due
// time, not its revision), so GET, DELETE, PATCH and keys find a patched timer on disk too.
//
//   bySeq: seq ─► row ─► { revision, fireAtMs }      (a Map per ADD record with patched rows)
//
// Kept across checkpoints in the manifest (docs/format/spill.md, "rescheduled"), rebuilt by
// replaying RESCHEDULE records, dropped when the timer is released (state.ts). Its memory is
// counted in /v1/stats (reschedules.redirect_bytes).

/** One patched timer: its revision (2 after the first PATCH) and the fire time the latest PATCH left it with. */
export interface Rescheduled {
  revision: number;
  fireAtMs: number;
}

/** The table as columns, entry i at index i of each (the manifest's form). */
export interface RescheduledColumns {
  readonly seqs: Float64Array;
  readonly rows: Uint32Array;
  readonly revisions: Uint32Array;
  readonly fireAtMs: Float64Array;
}

/** What an entry costs, roughly: the object, its slot in the inner Map, and a Map per ADD record shared by its rows. */
export const rescheduledEntryBytes = 96;

export class RescheduledTimers {
  readonly #bySeq = new Map<number, Map<number, Rescheduled>>();
  #size = 0;
  /** PATCHes applied since open (not replayed ones): the reschedules metric. */
  applied = 0;

  /** Patched timers held (the "redirects" of /v1/stats). */
  get size(): number {
    return this.#size;
  }

  /** Memory the table holds, estimated. */
  get bytesUsed(): number {
    return this.#size * rescheduledEntryBytes + this.#bySeq.size * rescheduledEntryBytes;
  }

  get(seq: number, row: number): Rescheduled | undefined {
    return this.#size === 0 ? undefined : this.#bySeq.get(seq)?.get(row);
  }

  /**
   * The fire time that names the timer's spill bucket: the one a PATCH gave it, else the one its
   * id carries (`idFireAtMs`). A spilled timer is never attempted, so its due time is this.
   */
  placeOf(seq: number, row: number, idFireAtMs: number): number {
    return this.get(seq, row)?.fireAtMs ?? idFireAtMs;
  }

  /** The timer's revision: 1 until a PATCH changed it. */
  revisionOf(seq: number, row: number): number {
    return this.get(seq, row)?.revision ?? 1;
  }

  set(seq: number, row: number, revision: number, fireAtMs: number): void {
    let rows = this.#bySeq.get(seq);
    if (rows === undefined) {
      rows = new Map();
      this.#bySeq.set(seq, rows);
    }
    const entry = rows.get(row);
    if (entry !== undefined) {
      entry.revision = revision;
      entry.fireAtMs = fireAtMs;
      return;
    }
    rows.set(row, { revision, fireAtMs });
    this.#size++;
  }

  delete(seq: number, row: number): void {
    if (this.#size === 0) return;
    const rows = this.#bySeq.get(seq);
    if (rows === undefined || !rows.delete(row)) return;
    this.#size--;
    if (rows.size === 0) this.#bySeq.delete(seq);
  }

  columns(): RescheduledColumns {
    const out = { seqs: new Float64Array(this.#size), rows: new Uint32Array(this.#size), revisions: new Uint32Array(this.#size), fireAtMs: new Float64Array(this.#size) };
    let i = 0;
    for (const [seq, rows] of this.#bySeq) {
      for (const [row, entry] of rows) {
        out.seqs[i] = seq;
        out.rows[i] = row;
        out.revisions[i] = entry.revision;
        out.fireAtMs[i] = entry.fireAtMs;
        i++;
      }
    }
    return out;
  }

  /** Adds every entry of `columns` (a checkpoint's, at open). */
  restore(columns: RescheduledColumns): void {
    for (let i = 0; i < columns.seqs.length; i++) this.set(columns.seqs[i] as number, columns.rows[i] as number, columns.revisions[i] as number, columns.fireAtMs[i] as number);
  }
}

export const noRescheduled: RescheduledColumns = { seqs: new Float64Array(0), rows: new Uint32Array(0), revisions: new Uint32Array(0), fireAtMs: new Float64Array(0) };
