// Which timers match a filter, in (due, id) order from a position on: the list's pages, the
// export's batches and the bulk cancel's set (GET /v1/timers, POST /v1/timers/cancel). Main
// thread, over the engine's state; nothing here changes a timer.
//
// A timer's due time is when it is next delivered: its dueAt while it waits or is being
// delivered (the fire time, or a retry's time), its fire time once finished. The order is
// (due, seq, row), and (seq, row) orders ids (docs/format/ids.md), so a position (due, id) is a
// key of that order: valid across restarts, and a timer whose due time changes during a scan
// may be seen twice or not at all.
//
//   resident: one pass over the store's columns keeps the `cap` smallest matches after the
//             position in a bounded max-heap (no sort of all resident timers)
//   spilled:  buckets in start order from the position's bucket (spill/spilled-scan.ts), each
//             batch from its first row after the position, until `cap` matches are found or a
//             bucket starts after the resident's cap-th match; the next bucket is read while
//             one is scanned when that one is not expected to fill the page
//   merge:    the two ordered lists merged, cut to `cap`; the resident pass runs again after
//             the last read, so the slots handed to `use` are live in the same turn (unless
//             the user looks resident timers up again itself: the export)
//
// What a scan finds is kept in columns (timer-hits.ts) a HitQuery reuses scan after scan; the
// list's page turns its few into objects.
import { setImmediate as nextTurn } from 'node:timers/promises';
import { getTimer, spilledTimerView } from './cancel-lookup.ts';
import { decodeTimerId, encodeTimerId } from './ids.ts';
import { type BucketReads, cachedReads } from './spill/scan-reads.ts';
import { type BucketGroup, BucketGroups, firstRowAfter } from './spill/spilled-scan.ts';
import type { RunRows } from './spill/run-rows.ts';
import type { EngineState } from './state.ts';
import { keyHash } from './store/key-index.ts';
import { type ReadonlyColumn, timerState } from './store/resident-store.ts';
import { compareHits, HitList } from './timer-hits.ts';
import type { TimerStateName, TimerView } from './types.ts';

/** What a scan matches; every field given must hold. */
export interface TimerFilter {
  readonly queue?: string;
  readonly state?: TimerStateName;
  /** Keys that start with these bytes. */
  readonly keyPrefix?: Uint8Array;
  /** The key exactly. */
  readonly key?: Uint8Array;
  /** Due at or after (epoch ms). */
  readonly dueAfterMs?: number;
  /** Due before (epoch ms). */
  readonly dueBeforeMs?: number;
}

/** A place in the order: the scan goes on after the timer (seq, row) due at dueMs. */
export interface QueryPosition {
  readonly dueMs: number;
  readonly seq: number;
  readonly row: number;
}

/** Before every timer. */
export const queryStart: QueryPosition = { dueMs: -Infinity, seq: -1, row: 0 };

/**
 * A matching timer: resident at `slot` (valid only within the turn `use` is called in), or
 * spilled, row `index` of `rows`.
 */
export interface TimerHit {
  readonly dueMs: number;
  readonly seq: number;
  readonly row: number;
  readonly fireAtMs: number;
  readonly slot: number;
  readonly rows: RunRows | undefined;
  readonly index: number;
}

const stateCodes: Readonly<Record<TimerStateName, number>> = {
  pending: timerState.pending,
  delivering: timerState.delivering,
  retrying: timerState.retrying,
  delivered: timerState.delivered,
  dead: timerState.dead,
  cancelled: timerState.cancelled,
};

/** Tries before a scan that keeps meeting a moving spill tier (checkpoint, promotion) takes what it has. */
const spillMovesMax = 3;

/** (due, seq, row) of a comes before b's. */
export function hitOrder(a: QueryPosition, b: QueryPosition): number {
  return a.dueMs - b.dueMs || a.seq - b.seq || a.row - b.row;
}

/** The cursor of a position: opaque to clients (base64url of the due time and the timer's id). */
export function encodeCursor(hit: TimerHit): string {
  return Buffer.from(`${hit.dueMs}~${encodeTimerId(hit.seq, hit.row, hit.fireAtMs)}`).toString('base64url');
}

/** The position a cursor names, or undefined when the string is not a cursor. */
export function decodeCursor(cursor: string): QueryPosition | undefined {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(cursor)) return undefined;
  const text = Buffer.from(cursor, 'base64url').toString('latin1');
  const match = /^(-?\d{1,16})~([0-9a-z]{24})$/.exec(text);
  if (match === null || Buffer.from(text, 'latin1').toString('base64url') !== cursor) return undefined;
  const dueMs = Number(match[1]);
  const id = decodeTimerId(match[2] as string);
  if (!Number.isSafeInteger(dueMs) || id === undefined) return undefined;
  return { dueMs, seq: id.seq, row: id.row };
}

/**
 * The lists one scan fills: what it found and its working lists, made once and reused by every
 * scan of an export (an object per timer found lived long enough to cost full collections).
 */
export class HitQuery {
  readonly #found: HitList;
  readonly #resident: HitList;
  readonly #spilled: HitList;
  readonly #scratch: HitList;
  readonly #liveSlots: boolean;
  readonly #reads: BucketReads | undefined;
  #best: BestPositions | undefined;
  /**
   * A sliced pass that found every resident match after its position (fewer than the cap) with
   * no change to the store meanwhile: while the store's change count stays the same, the next
   * windows of the same filter take their resident matches from its list, not another pass.
   */
  #complete: { readonly filter: TimerFilter; readonly changes: number; readonly after: QueryPosition } | undefined;

  /**
   * `liveSlots`: whether `use` needs the resident entries' slots live, so the resident pass runs
   * in one turn, and again after the spilled reads took turns; a user that looks each resident
   * timer up again itself (the export, batch by batch) saves that second pass over every
   * resident slot a window, and has the first in slices that leave the loop to others between.
   * `reads`: where spilled batches are read from (a long scan's own, spill/scan-reads.ts: a
   * window begins at each find), else through the engine's bucket cache.
   */
  constructor(cap: number, { liveSlots = true, reads }: { liveSlots?: boolean; reads?: BucketReads } = {}) {
    this.#liveSlots = liveSlots;
    this.#reads = reads;
    this.#found = new HitList(cap);
    this.#resident = new HitList(cap);
    this.#spilled = new HitList(cap);
    this.#scratch = new HitList(cap);
  }

  /**
   * The first `cap` timers matching `filter` after `after`, in order, handed to `use` in the
   * same turn as the store was read (so resident slots are live, when `liveSlots`), and what
   * `use` makes of them.
   * The list is this query's: valid until its next find.
   */
  async find<T>(s: EngineState, filter: TimerFilter, after: QueryPosition, cap: number, use: (hits: HitList) => T): Promise<T> {
    const found = this.#found;
    if (filter.key !== undefined) return keyHits(s, filter, filter.key, after, found, use);
    const reads = this.#reads ?? cachedReads(s);
    reads.startWindow();
    for (let tries = 1; ; tries++) {
      const watermarkMs = s.spill.watermarkMs;
      const runs = s.spill.runs;
      const resident = this.#resident;
      const best = this.#bestOf(cap);
      if (this.#liveSlots) residentHits(s, filter, after, best, resident);
      else await this.#residentSliced(s, filter, after, cap, best, resident);
      const bound = resident.length >= cap ? resident.length - 1 : -1;
      const boundDueMs = bound < 0 ? undefined : (resident.dueMs[bound] as number);
      const read = await spilledHits(s, filter, after, cap, boundDueMs, this.#spilled, this.#scratch, reads);
      const moved = s.spill.watermarkMs !== watermarkMs || s.spill.runs !== runs;
      if (moved && tries < spillMovesMax) continue;
      // The reads took turns: the resident timers are read again, now, for `use`.
      if (read && this.#liveSlots) residentHits(s, filter, after, best, resident);
      dropTombstoned(s, this.#spilled);
      mergeHits(resident, this.#spilled, cap, found);
      return use(found);
    }
  }

  /**
   * The resident matches after `after` for a user that looks them up again itself: from the
   * last complete pass's list while the store is as it was then (an export past the resident
   * timers' due times, window after window), else a sliced pass.
   */
  async #residentSliced(s: EngineState, filter: TimerFilter, after: QueryPosition, cap: number, best: BestPositions, resident: HitList): Promise<void> {
    const complete = this.#complete;
    if (complete !== undefined && complete.filter === filter && complete.changes === s.store.changes && hitOrder(after, complete.after) >= 0) {
      dropThrough(resident, after);
      return;
    }
    const changes = s.store.changes;
    await residentHitsSliced(s, filter, after, best, resident);
    this.#complete = resident.length < cap && s.store.changes === changes ? { filter, changes, after } : undefined;
  }

  /** The heap of a resident pass keeping `cap`, made again only when the cap changes. */
  #bestOf(cap: number): BestPositions {
    if (this.#best?.cap !== cap) this.#best = new BestPositions(cap);
    return this.#best;
  }
}

/** The first `cap` timers matching `filter` after `after`, in order, as objects handed to `use` in the same turn as the store was read (a page's few). */
export function queryHits<T>(s: EngineState, filter: TimerFilter, after: QueryPosition, cap: number, use: (hits: TimerHit[]) => T): Promise<T> {
  return new HitQuery(Math.min(cap, 1024)).find(s, filter, after, cap, (found) => use(hitObjects(found)));
}

function hitObjects(found: HitList): TimerHit[] {
  const hits: TimerHit[] = [];
  for (let i = 0; i < found.length; i++) {
    const rows = found.rowsOf(i);
    hits.push({ dueMs: found.dueMs[i] as number, seq: found.seq[i] as number, row: found.row[i] as number, fireAtMs: found.fireAtMs[i] as number, slot: found.slot[i] as number, rows, index: found.index[i] as number });
  }
  return hits;
}

/** The entries of a list in order that come at or before `after`, left out (in place). */
function dropThrough(hits: HitList, after: QueryPosition): void {
  let first = 0;
  while (first < hits.length && !isAfter(hits, first, after)) first++;
  if (first === 0) return;
  for (let i = first; i < hits.length; i++) hits.move(i, i - first);
  hits.length -= first;
}

/** Whether entry `i` of `hits` comes after `after` in (due, seq, row) order. */
function isAfter(hits: HitList, i: number, after: QueryPosition): boolean {
  return ((hits.dueMs[i] as number) - after.dueMs || (hits.seq[i] as number) - after.seq || (hits.row[i] as number) - after.row) > 0;
}

/** The spilled entries whose timer was cancelled since they were found, left out (in place). */
function dropTombstoned(s: EngineState, hits: HitList): void {
  let kept = 0;
  for (let i = 0; i < hits.length; i++) {
    if (s.spill.isTombstoned(hits.seq[i] as number, hits.row[i] as number)) continue;
    if (kept !== i) hits.move(i, kept);
    kept++;
  }
  hits.length = kept;
}

/** The first `cap` of two lists in order, in order, into `out` (a merge: no sort of the whole); `out` takes b's sources. */
function mergeHits(a: HitList, b: HitList, cap: number, out: HitList): void {
  out.clear();
  out.sources = b.sources;
  let i = 0;
  let j = 0;
  while (out.length < cap && (i < a.length || j < b.length)) {
    const takeA = j >= b.length || (i < a.length && compareHits(a, i, b, j) < 0);
    if (takeA) out.pushFrom(a, i++);
    else out.pushFrom(b, j++);
  }
}

/** How a resident timer is judged, read once per scan. */
interface ResidentTest {
  readonly state: number;
  readonly queueIndex: number;
  readonly fromMs: number;
  readonly beforeMs: number;
  readonly keyPrefix: Uint8Array | undefined;
}

function residentTest(s: EngineState, filter: TimerFilter): ResidentTest | undefined {
  let queueIndex = -1;
  if (filter.queue !== undefined) {
    const index = s.queueIndexOf.get(filter.queue);
    if (index === undefined) return undefined;
    queueIndex = index;
  }
  return {
    state: filter.state === undefined ? -1 : stateCodes[filter.state],
    queueIndex,
    fromMs: filter.dueAfterMs ?? -Infinity,
    beforeMs: filter.dueBeforeMs ?? Infinity,
    keyPrefix: filter.keyPrefix,
  };
}

/** A resident timer's due time in the list's order (see the head of this file). */
function residentDue(state: number, dueAtMs: number, fireAtMs: number): number {
  return waitsOrIsDelivered(state) ? dueAtMs : fireAtMs;
}

/** Whether a timer in `state` is due at its dueAt (else at its fire time, finished). */
function waitsOrIsDelivered(state: number): boolean {
  return state === timerState.pending || state === timerState.retrying || state === timerState.delivering;
}

function startsWith(bytes: Uint8Array, prefix: Uint8Array): boolean {
  if (bytes.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (bytes[i] !== prefix[i]) return false;
  return true;
}

/**
 * Calls `visit` for every resident timer matching `filter` after `after`: one pass over the
 * store's columns (read once, so `visit` must not change the store).
 */
export function forEachResidentMatch(s: EngineState, filter: TimerFilter, after: QueryPosition, visit: (slot: number, due: number, seq: number, row: number) => void): void {
  const test = residentTest(s, filter);
  if (test === undefined) return;
  const store = s.store;
  const { state, dueAt, fireAt, logSeq, row: rowColumn, queueIndex } = store;
  const slots = store.slotsUsed;
  for (let slot = 0; slot < slots; slot++) {
    const code = state[slot] as number;
    if (code === timerState.free || (test.state >= 0 && code !== test.state)) continue;
    if (test.queueIndex >= 0 && queueIndex[slot] !== test.queueIndex) continue;
    const due = residentDue(code, dueAt[slot] as number, fireAt[slot] as number);
    if (due < test.fromMs || due >= test.beforeMs || due < after.dueMs) continue;
    const seq = logSeq[slot] as number;
    const row = rowColumn[slot] as number;
    if (due === after.dueMs && (seq < after.seq || (seq === after.seq && row <= after.row))) continue;
    if (test.keyPrefix !== undefined && (store.keyLengthOf(slot) === 0 || !startsWith(store.keyOf(slot), test.keyPrefix))) continue;
    visit(slot, due, seq, row);
  }
}

/**
 * The `cap` smallest resident matches after `after`, in order, into `out`: one pass, a bounded
 * max-heap, in one turn (the slots handed on are live in it).
 */
function residentHits(s: EngineState, filter: TimerFilter, after: QueryPosition, best: BestPositions, out: HitList): void {
  out.clear();
  const test = residentTest(s, filter);
  if (test === undefined) return;
  best.clear();
  residentPass(s, test, after, best, 0, s.store.slotsUsed);
  best.sortedInto(out, s.store.fireAt);
}

/** Slots a turn of a sliced resident pass reads: at 10,000,000 pending the store has some 500,000, several milliseconds in one go. */
const residentSliceSlots = 65_536;

/**
 * residentHits in slices of residentSliceSlots slots, a turn each, for a user that looks each
 * resident timer up again itself (the export): a slot read in one slice may hold another timer
 * by the end, whose position then names no timer, or a timer moved meanwhile is seen twice or
 * not at all, as one whose due time changes during a scan may be.
 */
async function residentHitsSliced(s: EngineState, filter: TimerFilter, after: QueryPosition, best: BestPositions, out: HitList): Promise<void> {
  out.clear();
  const test = residentTest(s, filter);
  if (test === undefined) return;
  best.clear();
  for (let from = 0; from < s.store.slotsUsed; from += residentSliceSlots) {
    if (from > 0) await nextTurn();
    residentPass(s, test, after, best, from, Math.min(from + residentSliceSlots, s.store.slotsUsed));
  }
  best.sortedInto(out, s.store.fireAt);
}

/**
 * Offers slots [from, to) matching `test` after `after` to `best`. The pass is
 * forEachResidentMatch's, written out with the heap's largest due time at hand, so that once the
 * heap is full a timer due later costs two loads and a comparison.
 */
function residentPass(s: EngineState, test: ResidentTest, after: QueryPosition, best: BestPositions, from: number, to: number): void {
  const store = s.store;
  const { state, dueAt, fireAt, logSeq, row: rowColumn, queueIndex } = store;
  const fromMs = Math.max(test.fromMs, after.dueMs);
  let largestDue = best.full ? best.largestDue : Infinity;
  for (let slot = from; slot < to; slot++) {
    const code = state[slot] as number;
    if (code === timerState.free || (test.state >= 0 && code !== test.state)) continue;
    // One of the two time columns read, not both: the pass streams through every slot's.
    const due = waitsOrIsDelivered(code) ? (dueAt[slot] as number) : (fireAt[slot] as number);
    if (due > largestDue || due < fromMs || due >= test.beforeMs) continue;
    if (test.queueIndex >= 0 && queueIndex[slot] !== test.queueIndex) continue;
    const seq = logSeq[slot] as number;
    const row = rowColumn[slot] as number;
    if (due === after.dueMs && (seq < after.seq || (seq === after.seq && row <= after.row))) continue;
    if (!best.admits(due, seq, row)) continue;
    if (test.keyPrefix !== undefined && (store.keyLengthOf(slot) === 0 || !startsWith(store.keyOf(slot), test.keyPrefix))) continue;
    best.offer(due, seq, row, slot);
    if (best.full) largestDue = best.largestDue;
  }
}

/**
 * Spilled matches after `after`, in order, into `hits` (at least the first `cap` of them, when
 * there are so many; none in a bucket starting after `boundDueMs`); whether a bucket was read,
 * taking turns.
 */
async function spilledHits(s: EngineState, filter: TimerFilter, after: QueryPosition, cap: number, boundDueMs: number | undefined, hits: HitList, scratch: HitList, reads: BucketReads): Promise<boolean> {
  hits.clear();
  // Spilled timers are pending and due at their fire time.
  if (filter.state !== undefined && filter.state !== 'pending') return false;
  const fromMs = filter.dueAfterMs ?? -Infinity;
  const beforeMs = filter.dueBeforeMs ?? Infinity;
  let read = false;
  const groups = new BucketGroups(s.spill, Math.max(fromMs, after.dueMs), beforeMs);
  const within = (g: number): BucketGroup | undefined => {
    const group = groups.at(g);
    return group !== undefined && (boundDueMs === undefined || group.startMs <= boundDueMs) ? group : undefined;
  };
  // The next group is read while this one is scanned when this one is not expected to fill what
  // is missing (at the share of rows that matched so far): an export's window or a filtered page
  // overlaps its reads with its scans, a page that one group fills decodes no bucket for nothing.
  const first = within(0);
  let next = first === undefined ? undefined : readGroup(reads, first);
  let scanned = 0;
  for (let g = 0; next !== undefined; g++) {
    const batches = await next;
    // The group was just decoded in this turn: it is scanned in the next, leaving the loop to others between.
    if (g > 0) await nextTurn();
    read = true;
    const groupRows = (groups.at(g) as BucketGroup).rows;
    const expected = scanned === 0 ? groupRows : (groupRows * hits.length) / scanned;
    const following = within(g + 1);
    next = following !== undefined && expected < cap - hits.length ? readGroup(reads, following) : undefined;
    scanned += groupRows;
    const start = hits.length;
    // Each batch of the group may give what is missing (batches of one start overlap in time).
    const ends: number[] = [];
    for (const rows of batches) {
      collectRows(s, rows, filter, after, cap - start, hits);
      ends.push(hits.length);
    }
    // Batches of one start may come from several runs: merged into order within the group.
    if (batches.length > 1) mergeRanges(hits, start, ends, scratch);
    if (hits.length >= cap) break;
    if (next === undefined && following !== undefined) next = readGroup(reads, following);
  }
  return read;
}

/**
 * Entries [start, ends[last]) of `hits`, sorted ranges [start, ends[0]), [ends[0], ends[1]), …,
 * merged into one order in place (through `scratch`): a batch of each run, a handful.
 */
function mergeRanges(hits: HitList, start: number, ends: readonly number[], scratch: HitList): void {
  scratch.clear();
  scratch.sources = hits.sources;
  const heads = [start, ...ends.slice(0, -1)];
  const total = (ends[ends.length - 1] as number) - start;
  for (let n = 0; n < total; n++) {
    let best = -1;
    for (let r = 0; r < heads.length; r++) {
      const at = heads[r] as number;
      if (at < (ends[r] as number) && (best < 0 || compareHits(hits, at, hits, heads[best] as number) < 0)) best = r;
    }
    scratch.pushFrom(hits, heads[best] as number);
    heads[best] = (heads[best] as number) + 1;
  }
  for (let n = 0; n < total; n++) {
    hits.set(start + n, scratch.dueMs[n] as number, scratch.seq[n] as number, scratch.row[n] as number, scratch.fireAtMs[n] as number, scratch.slot[n] as number, scratch.source[n] as number, scratch.index[n] as number);
  }
}

/** The batches of a group, read together; a read left unused when the scan stops has its failure ignored. */
function readGroup(reads: BucketReads, group: BucketGroup): Promise<RunRows[]> {
  const reading = Promise.all(group.batches.map(({ run, bucket }) => reads.read(run, bucket)));
  reading.catch(() => undefined);
  return reading;
}

/**
 * Calls `visit` for every spilled timer matching `filter`, bucket group by bucket group in due
 * order (within a group, batch by batch), holding one group's decoded batches at a time; `visit`
 * answers false to stop. Whether the spill tier moved meanwhile is the caller's to check.
 */
export async function forEachSpilledMatch(s: EngineState, filter: TimerFilter, visit: (rows: RunRows, index: number) => boolean): Promise<void> {
  if (filter.state !== undefined && filter.state !== 'pending') return;
  const groups = new BucketGroups(s.spill, filter.dueAfterMs ?? -Infinity, filter.dueBeforeMs ?? Infinity);
  const first = groups.at(0);
  const reads = cachedReads(s);
  let next = first === undefined ? undefined : readGroup(reads, first);
  for (let g = 0; next !== undefined; g++) {
    const batches = await next;
    const following = groups.at(g + 1);
    next = following === undefined ? undefined : readGroup(reads, following);
    for (const rows of batches) {
      const queue = filter.queue === undefined ? -1 : rows.queues.indexOf(filter.queue);
      if (filter.queue !== undefined && queue < 0) continue;
      for (let i = 0; i < rows.rows; i++) if (rowMatches(s, rows, i, filter, queue) && !visit(rows, i)) return;
    }
  }
}

/** Appends up to `cap` matches of one sorted batch after `after` to `hits`. */
function collectRows(s: EngineState, rows: RunRows, filter: TimerFilter, after: QueryPosition, cap: number, hits: HitList): void {
  const queue = filter.queue === undefined ? -1 : rows.queues.indexOf(filter.queue);
  if (filter.queue !== undefined && queue < 0) return;
  const beforeMs = filter.dueBeforeMs ?? Infinity;
  const source = hits.sources.push(rows) - 1;
  let taken = 0;
  for (let i = firstRowAfter(rows, after.dueMs, after.seq, after.row); i < rows.rows && taken < cap; i++) {
    if ((rows.dueAtMs[i] as number) >= beforeMs) return;
    if (!rowMatches(s, rows, i, filter, queue)) continue;
    hits.push(rows.dueAtMs[i] as number, rows.seq[i] as number, rows.row[i] as number, rows.fireAtMs[i] as number, -1, source, i);
    taken++;
  }
}

/** Whether row `i` of a spilled batch matches `filter` (`queue`: the queue's index in the batch, -1 for any). */
function rowMatches(s: EngineState, rows: RunRows, i: number, filter: TimerFilter, queue: number): boolean {
  const due = rows.dueAtMs[i] as number;
  if (due < (filter.dueAfterMs ?? -Infinity) || due >= (filter.dueBeforeMs ?? Infinity)) return false;
  if (queue >= 0 && rows.queueIndex[i] !== queue) return false;
  const prefix = filter.keyPrefix;
  if (prefix !== undefined) {
    const start = rows.keys.offsets[i] as number;
    const end = rows.keys.offsets[i + 1] as number;
    if (end === start || end - start < prefix.length || !startsWith(rows.keys.values.subarray(start, start + prefix.length), prefix)) return false;
  }
  return !s.spill.isTombstoned(rows.seq[i] as number, rows.row[i] as number);
}

/** The one timer holding `key` (resident, else spilled), if it matches the rest of the filter. */
async function keyHits<T>(s: EngineState, filter: TimerFilter, key: Uint8Array, after: QueryPosition, hits: HitList, use: (hits: HitList) => T): Promise<T> {
  const hash = keyHash(key);
  const holder = await s.spill.keyHolder(key, hash);
  const found = holder === null || s.spill.isTombstoned(holder.seq, holder.row) ? undefined : await s.spill.find(holder.seq, holder.row, holder.fireAtMs);
  hits.clear();
  const slot = s.keys.find(key, 0, key.length, hash);
  const test = residentTest(s, filter);
  if (slot >= 0 && test !== undefined) {
    const store = s.store;
    const code = store.state[slot] as number;
    const due = residentDue(code, store.dueAt[slot] as number, store.fireAt[slot] as number);
    const position = { dueMs: due, seq: store.logSeq[slot] as number, row: store.row[slot] as number };
    const inQueue = test.queueIndex < 0 || store.queueIndex[slot] === test.queueIndex;
    if ((test.state < 0 || code === test.state) && inQueue && due >= test.fromMs && due < test.beforeMs && hitOrder(position, after) > 0) {
      hits.push(due, position.seq, position.row, store.fireAt[slot] as number, slot, -1, -1);
    }
  } else if (found !== undefined) {
    const { rows, index } = found;
    const queue = filter.queue === undefined ? -1 : rows.queues.indexOf(filter.queue);
    const position = { dueMs: rows.dueAtMs[index] as number, seq: rows.seq[index] as number, row: rows.row[index] as number };
    const stateMatches = filter.state === undefined || filter.state === 'pending';
    if (stateMatches && (filter.queue === undefined || queue >= 0) && rowMatches(s, rows, index, filter, queue) && hitOrder(position, after) > 0) {
      hits.push(position.dueMs, position.seq, position.row, rows.fireAtMs[index] as number, -1, hits.sources.push(rows) - 1, index);
    }
  }
  return use(hits);
}

/**
 * The `cap` smallest (due, seq, row) offered, with a slot each: a max-heap in typed arrays, so
 * a pass over millions of slots makes no object for those it does not keep.
 */
class BestPositions {
  readonly #cap: number;
  readonly #due: Float64Array;
  readonly #seq: Float64Array;
  readonly #row: Float64Array;
  readonly #slot: Int32Array;
  #size = 0;

  constructor(cap: number) {
    this.#cap = cap;
    this.#due = new Float64Array(cap);
    this.#seq = new Float64Array(cap);
    this.#row = new Float64Array(cap);
    this.#slot = new Int32Array(cap);
  }

  get cap(): number {
    return this.#cap;
  }

  get full(): boolean {
    return this.#size === this.#cap;
  }

  clear(): void {
    this.#size = 0;
  }

  /** The due time of the largest kept (meaningful once something is kept). */
  get largestDue(): number {
    return this.#due[0] as number;
  }

  /** Whether (due, seq, row) would be kept: room left, or it comes before the largest kept. */
  admits(due: number, seq: number, row: number): boolean {
    if (this.#size < this.#cap) return true;
    const topDue = this.#due[0] as number;
    return due < topDue || (due === topDue && (seq < (this.#seq[0] as number) || (seq === this.#seq[0] && row < (this.#row[0] as number))));
  }

  offer(due: number, seq: number, row: number, slot: number): void {
    if (this.#size < this.#cap) {
      this.#set(this.#size, due, seq, row, slot);
      this.#up(this.#size++);
    } else if (this.#cap > 0) {
      this.#set(0, due, seq, row, slot);
      this.#down(0);
    }
  }

  /** What was kept, smallest first, into `out` (its resident entries, fire times from `fireAt`): the heap popped from the back (no comparator sort). */
  sortedInto(out: HitList, fireAt: ReadonlyColumn): void {
    out.resize(this.#size);
    while (this.#size > 0) {
      const last = --this.#size;
      const slot = this.#slot[0] as number;
      out.set(last, this.#due[0] as number, this.#seq[0] as number, this.#row[0] as number, fireAt[slot] as number, slot, -1, -1);
      this.#swap(0, last);
      this.#down(0);
    }
  }

  #compare(a: number, b: number): number {
    return (this.#due[a] as number) - (this.#due[b] as number) || (this.#seq[a] as number) - (this.#seq[b] as number) || (this.#row[a] as number) - (this.#row[b] as number);
  }

  #set(at: number, due: number, seq: number, row: number, slot: number): void {
    this.#due[at] = due;
    this.#seq[at] = seq;
    this.#row[at] = row;
    this.#slot[at] = slot;
  }

  #swap(a: number, b: number): void {
    const due = this.#due[a] as number;
    const seq = this.#seq[a] as number;
    const row = this.#row[a] as number;
    const slot = this.#slot[a] as number;
    this.#set(a, this.#due[b] as number, this.#seq[b] as number, this.#row[b] as number, this.#slot[b] as number);
    this.#set(b, due, seq, row, slot);
  }

  #up(at: number): void {
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (this.#compare(at, parent) <= 0) return;
      this.#swap(at, parent);
      at = parent;
    }
  }

  #down(at: number): void {
    for (;;) {
      const left = 2 * at + 1;
      if (left >= this.#size) return;
      const right = left + 1;
      const larger = right < this.#size && this.#compare(right, left) > 0 ? right : left;
      if (this.#compare(larger, at) <= 0) return;
      this.#swap(at, larger);
      at = larger;
    }
  }
}

/** A page of GET /v1/timers: `nextCursor` names the place after its last timer, null when no timer follows. */
export interface TimerPage {
  readonly timers: TimerView[];
  readonly nextCursor: string | null;
}

/** The view of a hit (in the turn `use` is called in). */
export function viewOfHit(s: EngineState, hit: TimerHit): TimerView | undefined {
  const id = encodeTimerId(hit.seq, hit.row, hit.fireAtMs);
  return hit.rows === undefined ? getTimer(s, id) : spilledTimerView(s, id, hit.rows, hit.index);
}

/** The `limit` first timers matching `filter` after `after`, and the cursor of the next page. */
export function listTimers(s: EngineState, filter: TimerFilter, limit: number, after: QueryPosition): Promise<TimerPage> {
  return queryHits(s, filter, after, limit + 1, (hits) => {
    const timers: TimerView[] = [];
    for (let i = 0; i < hits.length && i < limit; i++) {
      const view = viewOfHit(s, hits[i] as TimerHit);
      if (view !== undefined) timers.push(view);
    }
    return { timers, nextCursor: hits.length > limit ? encodeCursor(hits[limit - 1] as TimerHit) : null };
  });
}
