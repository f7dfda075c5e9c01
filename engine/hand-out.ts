// Hand-out: due timers to the dispatcher, on the main thread. takeDue() pops what is due off
// the heap (and takes it ahead when a queue lets it), holds back in order the timers of a queue
// with no room (parked) so other queues go on, and marks them delivering (not logged: after a
// crash they are pending again). A paused queue has no room (queue-pause.ts): its due timers
// are parked until its resume. deliveryInto() gives a handed-out timer's bytes without a copy.
// The hottest code of the engine: no object or closure per timer, plain column reads.
//
//   heap (dueAt order) ─► due? ─► queue room? ─yes─► slice (columns) ─► dispatcher
//                                            └─no──► parked[queue] ─► next takeDue, oldest first
import assert from 'node:assert/strict';
import { isPausedAt, parkedInPausedQueues } from './queue-pause.ts';
import type { EngineState } from './state.ts';
import { timerState } from './store/resident-store.ts';
import type { DueSlice, QueueRoom, TakeAhead, TimerDelivery, TimerDeliveryRef } from './types.ts';
import { callbackResponseBytesMax } from './callbacks.ts';

const noBytes = new Uint8Array(0);

/** A DueSlice being filled: the same columns, with a count that grows. */
type SliceBuilder = Omit<DueSlice, 'count'> & { count: number };

/** When the next delivery falls due (now, while timers are held back for room), leaving out the expiry of finished timers; undefined when none is resident before the watermark. */
export function nextDeliveryDueMs(s: EngineState): number | undefined {
  if (waitingForRoom(s)) return s.clock.now();
  const due = s.heap.peek();
  if (due < 0) return undefined;
  const dueAtMs = s.store.dueAt[due] as number;
  // Past the watermark nothing is handed out until a promotion moves it (and says so).
  return dueAtMs < s.spill.watermarkMs ? dueAtMs : undefined;
}

/** When the engine next has work: a timer falls due or a finished one's retention ends (undefined: never). */
export function nextDueMs(s: EngineState): number | undefined {
  const deliveryMs = nextDeliveryDueMs(s);
  // Held-back timers are due already: the scheduler keeps looking while any wait for room.
  if (waitingForRoom(s)) return deliveryMs;
  const expiring = s.expiring.peek();
  if (expiring < 0) return deliveryMs;
  const expiryMs = s.store.dueAt[expiring] as number;
  return deliveryMs === undefined ? expiryMs : Math.min(deliveryMs, expiryMs);
}

/**
 * Whether parked timers wait for room. Those of a paused queue do not: they wait for its resume,
 * which tells the scheduler (onDueChanged), so a pause costs no tick.
 */
function waitingForRoom(s: EngineState): boolean {
  return s.parkedCount > 0 && (s.pausedQueues.size === 0 || s.parkedCount > parkedInPausedQueues(s));
}

/**
 * Takes up to `max` timers due at `nowMs` (fire time ≤ now, earliest first) out of the heap
 * and marks them delivering. Delivering is not logged: after a crash such a timer is pending
 * again and is delivered again (at-least-once). With `queueRoom`, a queue takes no more than
 * its room; its other due timers are held back in order (parked) and go first once it has room,
 * so a slow or rate-limited queue never stands in front of another queue's timers. A paused
 * queue has no room, whatever `queueRoom` says.
 */
export function takeDue(s: EngineState, nowMs: number, max: number, queueRoom?: QueueRoom, ahead?: TakeAhead): DueSlice {
  const store = s.store;
  const slice: SliceBuilder = {
    count: 0,
    seqs: new Float64Array(max),
    rows: new Uint32Array(max),
    attempts: new Uint32Array(max),
    fireAtMs: new Float64Array(max),
    dueAtMs: new Float64Array(max),
    queues: new Uint16Array(max),
  };
  // Finished timers whose retention ended are released on the way, up to a bound of their own.
  s.releaseExpired(nowMs, max * 4);
  const room = queueRoom === undefined ? undefined : new Float64Array(s.queueNames.length).fill(NaN);
  const roomOf = (queue: number): number => {
    if (room === undefined) return isPausedAt(s, queue) ? 0 : Infinity;
    if (Number.isNaN(room[queue])) room[queue] = isPausedAt(s, queue) ? 0 : Math.max(0, (queueRoom as QueueRoom)(queue));
    return room[queue] as number;
  };
  if (s.parkedCount > 0) takeParked(s, slice, nowMs, max, roomOf, room);
  // Parking is bounded per call too, so one tick never walks a whole backlog; it is cheap
  // (a pop and a push), so the bound is generous and a blocked backlog clears in few ticks.
  // The watermark is a fence: a timer due at or past it waits for the loader to promote its
  // bucket (logged), so nothing fires whose spilled copy could still be promoted as pending.
  const fenceMs = s.spill.watermarkMs;
  for (let parkedNow = 0; slice.count < max && parkedNow < max * 16; ) {
    const slot = s.heap.peek();
    if (slot < 0) break;
    const dueAtMs = store.dueAt[slot] as number;
    const queue = store.queueIndex[slot] as number;
    if (dueAtMs >= fenceMs) break;
    // Not due yet: taken only ahead, for a queue whose timers may be and that has room (the
    // heap's order is kept, and nothing that is not due is held back).
    if (dueAtMs > nowMs && (ahead === undefined || dueAtMs > nowMs + ahead.ms || !ahead.queue(queue) || roomOf(queue) <= 0)) break;
    s.heap.pop();
    if (roomOf(queue) <= 0) {
      park(s, queue, slot);
      parkedNow++;
      continue;
    }
    if (room !== undefined) room[queue] = (room[queue] as number) - 1;
    handOut(s, slice, slot);
  }
  const count = slice.count;
  return {
    count,
    seqs: slice.seqs.subarray(0, count),
    rows: slice.rows.subarray(0, count),
    attempts: slice.attempts.subarray(0, count),
    fireAtMs: slice.fireAtMs.subarray(0, count),
    dueAtMs: slice.dueAtMs.subarray(0, count),
    queues: slice.queues.subarray(0, count),
  };
}

/** The name of the queue with index `index` (DueSlice.queues). */
export function queueNameAt(s: EngineState, index: number): string {
  const name = s.queueNames[index];
  // A plain condition, assert only on failure: this runs once per timer handed out (a template message would be built every time).
  if (name === undefined) assert.fail(`no queue has index ${index}`);
  return name;
}

function handOut(s: EngineState, slice: SliceBuilder, slot: number): void {
  const store = s.store;
  const at = slice.count++;
  const dueAtMs = store.dueAt[slot] as number;
  // Due by its queue's last resume and still here: it was held by that pause (one compare for most timers).
  if (dueAtMs <= s.resumedAtMsMax && dueAtMs <= (s.queueResumedAtMs[store.queueIndex[slot] as number] ?? -Infinity)) s.heldReleased++;
  s.setState(slot, timerState.delivering);
  slice.seqs[at] = store.logSeq[slot] as number;
  slice.rows[at] = store.row[slot] as number;
  slice.attempts[at] = (store.attempts[slot] as number) + 1;
  slice.fireAtMs[at] = store.fireAt[slot] as number;
  slice.dueAtMs[at] = dueAtMs;
  slice.queues[at] = store.queueIndex[slot] as number;
}

function park(s: EngineState, queue: number, slot: number): void {
  let parked = s.parked[queue];
  if (parked === undefined) {
    parked = { handles: [], head: 0 };
    s.parked[queue] = parked;
  }
  parked.handles.push(s.store.handleOf(slot));
  s.parkedCount++;
}

/** Hands out held-back timers of queues that have room again, oldest first. */
function takeParked(s: EngineState, slice: SliceBuilder, nowMs: number, max: number, roomOf: (queue: number) => number, room: Float64Array | undefined): void {
  const store = s.store;
  for (let queue = 0; queue < s.parked.length && slice.count < max; queue++) {
    const parked = s.parked[queue];
    if (parked === undefined || parked.head === parked.handles.length) continue;
    while (parked.head < parked.handles.length && slice.count < max && roomOf(queue) > 0) {
      const slot = store.slotOf(parked.handles[parked.head] as number);
      parked.head++;
      s.parkedCount--;
      // Stale: released, taken again after a retry, back in the heap after a failed cancel or PATCH, or being cancelled.
      const state = slot < 0 ? -1 : (store.state[slot] as number);
      if ((state !== timerState.pending && state !== timerState.retrying) || s.heap.has(slot) || s.cancelling.has(slot)) continue;
      // Being patched (reschedule.ts): out of the heap until its record is durable.
      if (s.rescheduling.size > 0 && s.rescheduling.has(`${store.logSeq[slot]}:${store.row[slot]}`)) continue;
      // The clock stepped back since it was held back: not due any more, so back to the heap (never early).
      if ((store.dueAt[slot] as number) > nowMs) {
        s.heap.push(slot);
        continue;
      }
      if (room !== undefined) room[queue] = (room[queue] as number) - 1;
      handOut(s, slice, slot);
    }
    if (parked.head === parked.handles.length) {
      parked.handles.length = 0;
      parked.head = 0;
    } else if (parked.head > 1024 && parked.head * 2 > parked.handles.length) {
      parked.handles.splice(0, parked.head);
      parked.head = 0;
    }
  }
}

/**
 * What a dispatcher needs to deliver a timer it was handed: its target, and its payload,
 * headers and key back to back in one view of the store's arena (copy to keep).
 */
export function deliveryOf(s: EngineState, seq: number, row: number): TimerDelivery | undefined {
  const slot = s.index.get(seq, row);
  if (slot < 0) return undefined;
  const store = s.store;
  return {
    target: store.targetOf(slot),
    bytes: store.arena.view(store.bytesRefOf(slot), store.bytesLengthOf(slot) - store.callbacksLengthOf(slot)),
    payloadLength: store.payloadLengthOf(slot),
    headersLength: store.headersLengthOf(slot),
  };
}

/**
 * As deliveryOf, into `into` (one object filled again for every timer) and with no view made:
 * `bytes` is the buffer that holds them from `bytesStart` on, to be read before the next
 * admit, settle or await (the arena reuses freed bytes). False when the timer is not resident.
 */
export function deliveryInto(s: EngineState, seq: number, row: number, into: TimerDeliveryRef): boolean {
  const slot = s.index.get(seq, row);
  if (slot < 0) return false;
  const store = s.store;
  const arena = store.arena;
  const length = store.bytesLengthOf(slot);
  const ref = store.bytesRefOf(slot);
  into.target = store.targetOf(slot);
  into.bytes = length === 0 ? noBytes : arena.slabOf(ref, length);
  into.bytesStart = length === 0 ? 0 : arena.offsetOf(ref);
  into.payloadLength = store.payloadLengthOf(slot);
  into.headersLength = store.headersLengthOf(slot);
  into.keyLength = store.keyLengthOf(slot);
  into.responseBytesMax = store.hasCallbacks(slot) ? callbackResponseBytesMax : 0;
  return true;
}
