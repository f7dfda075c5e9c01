// The client's own record of what fermata acknowledged, for kill -9 tests, and the invariants
// checked against it once every incarnation of the service is over:
//
//   - every acknowledged add (not cancelled) was delivered; GET shows it delivered (an add whose
//     cancel was cut by a kill may be either)
//   - a far-future add (due days later: it may have been spilled to disk and back) is never
//     delivered; GET shows it pending, or cancelled when its cancel was acknowledged
//   - nothing appears that was never sent, or that was refused with a 4xx
//   - no acknowledged cancel is delivered after the cancel was acknowledged; GET shows it cancelled
//   - no delivery arrives before the fire_at the add was acknowledged with
//   - two deliveries of one timer always have a kill between them (a duplicate only ever comes
//     from a delivery in flight when the service died)
//   - a key added again answers the original id with duplicate: true, across restarts
//
// Every timer carries a unique payload (its `uid`), which is how a delivery is matched to a send.
// A kill is the test's SIGKILL, or the service's own at a failpoint (engine/failpoints.ts), seen
// when its exit is: either way a span from the kill to the next "listening".
// Single-threaded: the test's main thread records into it.
import type { SinkRequest } from './sinks.ts';

export interface AckedAdd {
  readonly uid: string;
  readonly id: string;
  readonly fireAtMs: number;
  readonly key: string | undefined;
  /** Due long after the run ends: it must still be pending at the end, never delivered. */
  readonly far: boolean;
}

export interface AckedCancel {
  readonly uid: string;
  readonly id: string;
  /** When the 200 came back. */
  readonly ackedAtMs: number;
}

export class Kill9Ledger {
  /** Every uid put in a request body, answered or not. */
  readonly sent = new Set<string>();
  /** uids in requests answered with a 4xx: they must never appear. */
  readonly refused = new Set<string>();
  readonly adds = new Map<string, AckedAdd>();
  readonly cancels = new Map<string, AckedCancel>();
  /** Cancels answered 409: the timer was already delivering or finished. */
  readonly tooLate = new Set<string>();
  /** Cancels sent but never answered (cut by a kill): the timer may be cancelled or delivered. */
  readonly cancelsUnanswered = new Set<string>();
  /**
   * Each kill -9: when SIGKILL was sent, and when the next incarnation said "listening" (it
   * dispatches only after that). A delivery arriving in between belongs to the killed one: the
   * sink may read what the dying process sent a little after its exit is seen.
   */
  readonly kills: Array<{ readonly sentAtMs: number; restartedAtMs: number }> = [];
  readonly problems: string[] = [];

  killed(sentAtMs: number): void {
    this.kills.push({ sentAtMs, restartedAtMs: Number.POSITIVE_INFINITY });
  }

  /** The service is listening again: the last kill's span ends here. */
  restarted(atMs: number): void {
    const last = this.kills.at(-1);
    if (last !== undefined && last.restartedAtMs === Number.POSITIVE_INFINITY) last.restartedAtMs = atMs;
  }

  problem(text: string): void {
    if (this.problems.length < 50) this.problems.push(text);
  }

  /** Acknowledged adds that can still be cancelled: not cancelled, not too late, due after `notBeforeMs`. */
  cancellable(notBeforeMs: number): AckedAdd[] {
    const found: AckedAdd[] = [];
    for (const add of this.adds.values()) if (!this.cancels.has(add.uid) && !this.tooLate.has(add.uid) && !this.cancelsUnanswered.has(add.uid) && add.fireAtMs > notBeforeMs) found.push(add);
    return found;
  }

  /** uids acknowledged, not far-future, not cancelled, and not yet seen at the sink. */
  undelivered(deliveries: ReadonlyMap<string, readonly SinkRequest[]>): string[] {
    return [...this.adds.values()].filter((add) => !add.far && !this.cancels.has(add.uid) && !this.cancelsUnanswered.has(add.uid) && (deliveries.get(add.uid)?.length ?? 0) === 0).map((add) => add.uid);
  }

  /** The states GET may show for an acknowledged add once every near one is delivered. */
  expectedStates(add: AckedAdd): readonly string[] {
    const uncancelled = add.far ? 'pending' : 'delivered';
    if (this.cancels.has(add.uid)) return ['cancelled'];
    return this.cancelsUnanswered.has(add.uid) ? ['cancelled', uncancelled] : [uncancelled];
  }

  /** Checks every delivery the sink saw against the ledger; the problems found go to `problems`. */
  checkDeliveries(deliveries: ReadonlyMap<string, readonly SinkRequest[]>): void {
    for (const [uid, requests] of deliveries) {
      if (!this.sent.has(uid)) this.problem(`delivered ${uid}, which was never sent`);
      if (this.refused.has(uid)) this.problem(`delivered ${uid}, whose add was refused`);
      const add = this.adds.get(uid);
      for (const request of requests) {
        if (add !== undefined && request.atMs < add.fireAtMs) this.problem(`${uid} delivered at ${request.atMs}, before its fire_at ${add.fireAtMs}`);
        if (add !== undefined && request.headers['fermata-timer-id'] !== add.id) this.problem(`${uid} delivered as ${String(request.headers['fermata-timer-id'])}, acknowledged as ${add.id}`);
      }
      const cancel = this.cancels.get(uid);
      if (cancel !== undefined) {
        for (const request of requests) if (request.atMs > cancel.ackedAtMs) this.problem(`${uid} delivered at ${request.atMs}, after its cancel was acknowledged at ${cancel.ackedAtMs}`);
      }
      for (let i = 1; i < requests.length; i++) {
        const before = (requests[i - 1] as SinkRequest).atMs;
        const after = (requests[i] as SinkRequest).atMs;
        if (!this.kills.some((kill) => kill.restartedAtMs >= before && kill.sentAtMs <= after)) {
          const attempts = requests.map((request) => String(request.headers['fermata-attempt'])).join(', ');
          this.problem(`${uid} delivered twice (at ${before} and ${after}, attempts ${attempts}) with no kill between`);
        }
      }
    }
  }
}

/** The sink's requests grouped by the uid in their body. */
export function deliveriesByUid(requests: readonly SinkRequest[]): Map<string, SinkRequest[]> {
  const byUid = new Map<string, SinkRequest[]>();
  for (const request of requests) {
    const uid = request.body.toString('utf8');
    const list = byUid.get(uid);
    if (list === undefined) byUid.set(uid, [request]);
    else list.push(request);
  }
  return byUid;
}
