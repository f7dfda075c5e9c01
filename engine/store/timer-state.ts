// The codes of the resident store's `state` column: where a timer is in its life. A shared
// vocabulary, not a structure: the store, the shrink of its columns, the engine and the spill
// runs (docs/format/spill.md writes them to disk) all read these codes. Constants only; no thread.
//
//   free ──allocate──▶ pending ──┐
//                                ├──hand-out──▶ delivering ──▶ delivered | dead
//                      retrying ─┘ ◀── a retry, or a hand-out withdrawn ──┘
//   pending | retrying (| delivering, withdrawn) ──cancel──▶ cancelled
//   a finished timer whose retention ended, or a pending one spilled ──release──▶ free

/** Codes of the `state` column. */
export const timerState = {
  free: 0,
  pending: 1,
  delivering: 2,
  retrying: 3,
  delivered: 4,
  dead: 5,
  cancelled: 6,
} as const;

export type TimerStateCode = (typeof timerState)[keyof typeof timerState];

/** What the API calls a timer in each state (a free slot holds no timer). */
export const timerStateNames: Readonly<Record<number, Exclude<keyof typeof timerState, 'free'>>> = {
  [timerState.pending]: 'pending',
  [timerState.delivering]: 'delivering',
  [timerState.retrying]: 'retrying',
  [timerState.delivered]: 'delivered',
  [timerState.dead]: 'dead',
  [timerState.cancelled]: 'cancelled',
};
