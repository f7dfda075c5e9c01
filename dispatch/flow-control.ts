// Flow control: how many more due timers the dispatcher takes now, in all and per queue, so a
// slow or failing target holds back its own queue's timers and never another queue's. Main
// thread; the scheduler asks (room, and the engine's takeDue asks queueRoom once a queue per
// slice, holding back the timers of a queue without room), the dispatcher counts.
//
//   in all      deliveries in flight ≤ inFlightMax, of them single deliveries (a request each)
//               ≤ requestsInFlightMax, and the bytes tasks in flight hold ≤ inFlightBytesMax,
//               as a count of timers of the average size lately
//   per queue   max_concurrent deliveries in flight (a "request" queue without one gets a share
//               of the requests), rate_per_s tokens (a bucket of one second's worth), and for a
//               "pull" queue what waits and is leased in PullQueues
//
// What the dispatcher tells it, in order:
//
//   deliver(slice)   tokenSpent(queue), deliveryStarted(queue)   per timer (as they apply)
//                    started(deliveries, requests)               once the slice is handed out
//   a task is sent   taskSent(bytes held, bytes written)         the bytes' room and averages
//   it is recorded   taskDone(its queues, bytes held)            room freed: the scheduler wakes
//     (or failed)
import type { Clock, Engine } from '../engine/engine.ts';
import type { DispatchLimits } from '../engine/limits.ts';
import { byteFields, metaFields } from './delivery-task.ts';
import type { PullQueues } from './pull-queues.ts';

/** A timer's share of a task's meta and offsets arrays. */
const taskFixedBytesPerTimer = metaFields * Float64Array.BYTES_PER_ELEMENT + byteFields * Int32Array.BYTES_PER_ELEMENT;

export class FlowControl {
  readonly #engine: Engine;
  readonly #clock: Clock;
  readonly #limits: DispatchLimits;
  readonly #pull: PullQueues;
  #inFlight = 0;
  /** Of #inFlight, single deliveries (tasks without a sink). */
  #requestsInFlight = 0;
  /** Bytes the tasks in flight hold (their whole buffers: payloads, headers, keys, targets, ids, and room left). */
  #inFlightBytes = 0;
  /** Bytes of targets, headers, keys and payloads a timer's delivery writes into a task, on average lately: with its share of the meta and offsets, turns the byte room into a timer count. */
  #bytesPerTimer = 1024;
  /** Of #bytesPerTimer, the payload's: sizes a new task's payload column. */
  #payloadBytesPerTimer = 0;
  /** Whether #bytesPerTimer has seen a task yet (until then it is a guess, and tasks start small and grow). */
  #bytesPerTimerSeen = false;
  /** By queue index: deliveries in flight, and the rate bucket's tokens and last refill. */
  readonly #queueInFlight: number[] = [];
  readonly #queueTokens: number[] = [];
  readonly #queueTokensAtMs: number[] = [];

  constructor(engine: Engine, clock: Clock, limits: DispatchLimits, pull: PullQueues) {
    this.#engine = engine;
    this.#clock = clock;
    this.#limits = limits;
    this.#pull = pull;
  }

  /** Deliveries handed to workers (and pulled timers excluded) whose outcome is not yet recorded. */
  get inFlight(): number {
    return this.#inFlight;
  }

  get inFlightBytes(): number {
    return this.#inFlightBytes;
  }

  /** Payload bytes a timer wrote into a task, on average lately; undefined until a task was sent. */
  get payloadBytesPerTimer(): number | undefined {
    return this.#bytesPerTimerSeen ? this.#payloadBytesPerTimer : undefined;
  }

  /** How many more timers, of any queues, may be handed out now. */
  room(): number {
    // Large payloads: the bytes held by tasks in flight are bounded too, as a count of timers of
    // the average size lately (a slice of larger ones may pass it, by that slice at most).
    const byBytes = Math.floor((this.#limits.inFlightBytesMax - this.#inFlightBytes) / (this.#bytesPerTimer + taskFixedBytesPerTimer));
    // A slice may be all single deliveries: it is no larger than their room. Rows of Arrow
    // batches, which cost no request each, add up over slices to inFlightMax.
    const requestRoom = this.#limits.requestsInFlightMax - this.#requestsInFlight;
    return Math.max(0, Math.min(this.#limits.inFlightMax - this.#inFlight, requestRoom, byBytes));
  }

  /** How many more timers of the queue at `queueIndex` may be handed out now. */
  queueRoom(queueIndex: number): number {
    const config = this.#engine.queueConfig(this.#engine.queueNameAt(queueIndex));
    if (config.delivery === 'pull') {
      const room = this.#pull.room(queueIndex, config);
      return config.rate_per_s === null ? room : Math.min(room, Math.floor(this.#refill(queueIndex, config.rate_per_s)));
    }
    // Without a max_concurrent of its own, a request-mode queue gets a share of the room, so one
    // stuck on a slow target cannot hold all of it ("arrow" rows are batched: they take no share).
    const share = config.delivery === 'request' ? Math.floor(this.#limits.requestsInFlightMax * this.#limits.queueInFlightShareMax) : Infinity;
    let room = (config.max_concurrent ?? share) - (this.#queueInFlight[queueIndex] ?? 0);
    if (config.rate_per_s !== null) room = Math.min(room, Math.floor(this.#refill(queueIndex, config.rate_per_s)));
    return room;
  }

  /** A timer of a queue with a rate_per_s was handed out (pulled ones too): it spends a token. */
  tokenSpent(queueIndex: number): void {
    this.#queueTokens[queueIndex] = (this.#queueTokens[queueIndex] ?? 0) - 1;
  }

  /** A timer of the queue goes to a worker (a pulled one does not): it holds a place in the queue's max_concurrent until taskDone. */
  deliveryStarted(queueIndex: number): void {
    this.#queueInFlight[queueIndex] = (this.#queueInFlight[queueIndex] ?? 0) + 1;
  }

  /** A slice was handed out: `deliveries` of its timers went to workers, `requests` of them as single deliveries. */
  started(deliveries: number, requests: number): void {
    this.#inFlight += deliveries;
    this.#requestsInFlight += requests;
  }

  /**
   * A task of `count` timers went to a worker holding `heldBytes` (its whole buffers); it wrote
   * `usedBytes` into its columns, `payloadBytes` of them payloads: the averages lately follow.
   */
  taskSent(heldBytes: number, count: number, usedBytes: number, payloadBytes: number): void {
    this.#inFlightBytes += heldBytes;
    const observed = usedBytes / count;
    const observedPayload = payloadBytes / count;
    this.#bytesPerTimer = Math.max(64, this.#bytesPerTimerSeen ? 0.8 * this.#bytesPerTimer + 0.2 * observed : observed);
    this.#payloadBytesPerTimer = this.#bytesPerTimerSeen ? 0.8 * this.#payloadBytesPerTimer + 0.2 * observedPayload : observedPayload;
    this.#bytesPerTimerSeen = true;
  }

  /** A task's outcomes were recorded (or it ended unrecorded): its timers of `queues[0, count)`, requests or not, and its bytes leave the room. */
  taskDone(queues: Uint16Array, count: number, requests: boolean, heldBytes: number): void {
    for (let i = 0; i < count; i++) {
      const queue = queues[i] as number;
      this.#queueInFlight[queue] = (this.#queueInFlight[queue] as number) - 1;
    }
    this.#inFlight -= count;
    if (requests) this.#requestsInFlight -= count;
    this.#inFlightBytes -= heldBytes;
  }

  /** The queue's rate tokens now: the bucket holds one second's worth at most. */
  #refill(queueIndex: number, ratePerS: number): number {
    const now = this.#clock.now();
    const tokens = this.#queueTokens[queueIndex];
    const atMs = this.#queueTokensAtMs[queueIndex];
    const refilled = tokens === undefined || atMs === undefined ? ratePerS : Math.min(ratePerS, tokens + (Math.max(0, now - atMs) * ratePerS) / 1000);
    this.#queueTokens[queueIndex] = refilled;
    this.#queueTokensAtMs[queueIndex] = now;
    return refilled;
  }
}
