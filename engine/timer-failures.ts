// Why each timer's last attempt failed, for GET /v1/timers/{id} and /v1/dead (last_error,
// last_attempt_at). Main thread, part of EngineState. Only timers whose last attempt failed
// are here, keyed by slot: a delivered or released timer leaves, so the maps hold at most the
// store's retrying and dead timers, and nothing is kept for the timers that never failed (the
// great many). Error texts are interned: a target that is down gives thousands of timers one
// text ("HTTP 503", "connection refused"), held once with a count of the timers naming it and
// dropped with the last of them. Each text is at most deliveryLimits.lastErrorBytesMax bytes
// (the OUTCOME_DETAILED record that carries it, engine/records.ts, is bounded the same).
//
//   errorOf: slot → text id ─► texts[id] (refs[id] timers name it; a free id is reused)
//   attemptedAtOf: slot → epoch ms of that failed attempt
//
// The log's records are not all there is: a checkpoint writes these into its resident run
// (last_error, last_attempt_at: docs/format/spill.md) and restoring it puts them back, so they
// outlive the records the checkpoint let go. Spilled timers have none: only pending timers
// that were never attempted spill.

export class TimerFailures {
  readonly #errorOf = new Map<number, number>();
  readonly #attemptedAtOf = new Map<number, number>();
  readonly #texts: string[] = [];
  readonly #refs: number[] = [];
  readonly #idOfText = new Map<string, number>();
  readonly #freeIds: number[] = [];

  /** Timers with an entry. */
  get size(): number {
    return this.#errorOf.size;
  }

  /** Distinct texts held. */
  get textCount(): number {
    return this.#idOfText.size;
  }

  /** The timer at `slot` failed its last attempt at `attemptedAtMs`, with `text` (bounded already). */
  set(slot: number, text: string, attemptedAtMs: number): void {
    let id = this.#idOfText.get(text);
    if (id === undefined) {
      id = this.#freeIds.pop() ?? this.#texts.length;
      this.#texts[id] = text;
      this.#refs[id] = 0;
      this.#idOfText.set(text, id);
    }
    this.#refs[id] = (this.#refs[id] as number) + 1;
    this.clear(slot);
    this.#errorOf.set(slot, id);
    this.#attemptedAtOf.set(slot, attemptedAtMs);
  }

  /** The timer at `slot` has no failure to show (delivered, or its slot is released). */
  clear(slot: number): void {
    const id = this.#errorOf.get(slot);
    if (id === undefined) return;
    this.#errorOf.delete(slot);
    this.#attemptedAtOf.delete(slot);
    const refs = (this.#refs[id] as number) - 1;
    this.#refs[id] = refs;
    if (refs > 0) return;
    this.#idOfText.delete(this.#texts[id] as string);
    this.#texts[id] = '';
    this.#freeIds.push(id);
  }

  errorOf(slot: number): string | null {
    const id = this.#errorOf.get(slot);
    return id === undefined ? null : (this.#texts[id] as string);
  }

  attemptedAtOf(slot: number): number | null {
    return this.#attemptedAtOf.get(slot) ?? null;
  }

  /** Calls `visit` with each timer's slot, error text and attempt time (what a checkpoint writes). */
  forEach(visit: (slot: number, error: string, attemptedAtMs: number) => void): void {
    for (const [slot, id] of this.#errorOf) visit(slot, this.#texts[id] as string, this.#attemptedAtOf.get(slot) as number);
  }

  /** The store moved its timers (a shrink): `movedOf(slot)` is each one's new slot. */
  move(movedOf: (slot: number) => number): void {
    if (this.#errorOf.size === 0) return;
    const errors = [...this.#errorOf];
    const times = [...this.#attemptedAtOf];
    this.#errorOf.clear();
    this.#attemptedAtOf.clear();
    for (const [slot, id] of errors) this.#errorOf.set(movedOf(slot), id);
    for (const [slot, at] of times) this.#attemptedAtOf.set(movedOf(slot), at);
  }
}
