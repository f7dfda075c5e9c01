// One-timer adds forwarded to another node, a turn's at a time: the adds this node reads in one
// event-loop turn for one owner (keyed adds for its partitions; unkeyed ones on a node that owns
// none) go in ONE HTTP/2 request, and the owner answers each row as it would have answered that
// add sent alone. Without it, with N nodes, (N − 1)/N of keyed single adds cost a request each
// between nodes. Main thread, the front's (one ForwardedAdds per front).
//
//   sender (stream-admitter.ts: the raw HTTP/2 path, the add stream; front.ts: the route)
//                                             owner (front.ts, POST /v1/timers)
//   add(address, headers, timer, waiter) ─┐
//   add(…) ─────────────────────────────┼─► group per (owner, authorization, trace context)
//   add(…) ─────────────────────────────┘     flushed after the turn (setImmediate) or full
//        one add in the group  → POST /v1/timers, application/json, as before
//        several               → POST /v1/timers, forwardedAddsMediaType: one JSON timer a line
//                                  ─► each line read, checked, routed and admitted exactly as the
//                                     route does a forwarded one-timer add (the lines of a request
//                                     join the partition's admit coalescer in order, in one turn)
//                                  ◄─ 200 {"answers":[{"status","retry_after"?,"body"}, …]}
//        each waiter is told its row's status, Retry-After and body, as it would have been
//        told the owner's answer to its own request (OwnerAnswer, below)
//
// What the owner's answer depends on is the same for every add of a group: the token
// (authorization: its scopes and queues) and the trace context (which the owner puts into a
// forwarded timer's headers), so groups are cut by them. The whole request refused (the token,
// the owner gone: PARTITION_MOVING) is every row's answer, which it would have been alone. An
// owner that does not know the media type (415: an older build during a rolling upgrade) gets
// the group's adds again one request each. Only forwarded requests (with the cluster's secret)
// may use the media type.
import type { Caller } from '../../auth/access.ts';
import { checkAddQueues } from '../../auth/batch-queues.ts';
import type { AdmitWaiter } from '../../../engine/admit-coalescer.ts';
import { defaultQueue, type TimerSpec } from '../../../engine/batch/timer-batch.ts';
import type { Clock, DuplicateAnswer } from '../../../engine/engine.ts';
import { errorCodes, FermataError } from '../../../engine/errors.ts';
import type { TimerStateName } from '../../../engine/types.ts';
import { type TraceHeaders, withTrace } from '../../../engine/trace-context.ts';
import { clusterIdOf } from '../../../cluster/partitioning.ts';
import type { ClusterRouter } from '../../../cluster/router.ts';
import { inJsonTerms, specFromJsonTimer } from '../body/json-batch.ts';
import { type ErrorBody, errorAnswer, httpErrorCodes, HttpProblem, RelayedRefusal } from '../error-map.ts';
import { mediaTypes } from '../media-types.ts';
import { singleAddAnswer } from '../single-add.ts';
import type { ForwardAnswer, ForwardRequest } from './forwarder.ts';

/** The body of a request carrying several forwarded one-timer adds: one JSON timer a line. */
export const forwardedAddsMediaType = 'application/vnd.fermata.forwarded-adds+x-ndjson';

/** A group is sent at once when it reaches this many adds or bytes (well within the owner's body limit). */
const groupRowsMax = 1024;
const groupBytesMax = 8 * 1024 * 1024;

type Headers = Readonly<Record<string, string | string[] | undefined>>;
type Send = (address: string, request: ForwardRequest) => Promise<ForwardAnswer>;

/** A timer spec as the one-timer JSON add takes it (fire_at in epoch ms: a stream line's delay_ms is already counted). */
export function jsonOf(spec: TimerSpec): string {
  const payload = spec.payload;
  return JSON.stringify({
    fire_at: spec.fireAtMs,
    target: spec.target,
    ...(payload === undefined ? {} : typeof payload === 'string' ? { payload } : { payload_base64: Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString('base64') }),
    ...(spec.headers === undefined ? {} : { headers: spec.headers }),
    ...(spec.key === undefined ? {} : { key: spec.key }),
    ...(spec.queue === undefined ? {} : { queue: spec.queue }),
    ...(spec.callback === undefined ? {} : { callback: spec.callback }),
    ...(spec.failureCallback === undefined ? {} : { failure_callback: spec.failureCallback }),
  });
}

/** An owner's answer to one forwarded one-timer add (its status, Retry-After and parsed body), told to an admit waiter as the add's own. */
function tellParsed(waiter: AdmitWaiter, status: number, retryAfter: unknown, body: unknown): void {
  const fields = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  if ((status === 201 || status === 200) && typeof fields.id === 'string') {
    if (fields.duplicate !== true) return waiter.admitted(fields.id, false, undefined);
    const original: DuplicateAnswer = {
      state: fields.state as TimerStateName,
      revision: typeof fields.revision === 'number' ? fields.revision : 1,
      fireAtMs: Date.parse(String(fields.fire_at)),
      differs: Array.isArray(fields.differs) ? (fields.differs as DuplicateAnswer['differs']) : [],
    };
    return waiter.admitted(fields.id, true, original);
  }
  const seconds = Number(retryAfter);
  const error: ErrorBody =
    typeof fields.error === 'object' && fields.error !== null ? (fields as unknown as ErrorBody) : { error: { code: httpErrorCodes.internal, message: `the partition's owner answered ${status}` } };
  waiter.refused(new RelayedRefusal(status, Number.isInteger(seconds) ? seconds : undefined, error));
}

function parsedBody(answer: ForwardAnswer): unknown {
  try {
    return JSON.parse(answer.body.toString('utf8'));
  } catch {
    return undefined;
  }
}

/** What an owner answered one forwarded add: its status, the headers that carry meaning, and its body (parsed; undefined when it was not JSON). */
export interface OwnerAnswer {
  readonly status: number;
  readonly retryAfter: string | undefined;
  readonly wwwAuthenticate: string | undefined;
  readonly body: unknown;
}

/** Who hears how one forwarded add ended: the owner's answer, or why none came (PARTITION_MOVING: the owner out of reach). */
export interface ForwardWaiter {
  answered(answer: OwnerAnswer): void;
  refused(err: unknown): void;
}

/** A forwarded add's answer told to an admit waiter (the raw single-add path's, a stream line's), as the owner's answer to the add alone. */
export class ToldAdmitWaiter implements ForwardWaiter {
  readonly #waiter: AdmitWaiter;

  constructor(waiter: AdmitWaiter) {
    this.#waiter = waiter;
  }

  answered(answer: OwnerAnswer): void {
    tellParsed(this.#waiter, answer.status, answer.retryAfter, answer.body);
  }

  refused(err: unknown): void {
    this.#waiter.refused(err);
  }
}

function headerOf(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** An owner's answer to a whole request. */
function ownerAnswerOf(answer: ForwardAnswer, body: unknown): OwnerAnswer {
  return { status: answer.status, retryAfter: headerOf(answer.headers['retry-after']), wwwAuthenticate: headerOf(answer.headers['www-authenticate']), body };
}

interface Group {
  readonly address: string;
  readonly headers: Headers;
  readonly lines: string[];
  readonly waiters: ForwardWaiter[];
  bytes: number;
}

/** What sets a forwarded add's answer apart besides its body: the same for every add of a group. */
function groupKeyOf(address: string, headers: Headers): string {
  return `${address}\n${String(headers.authorization ?? '')}\n${String(headers.traceparent ?? '')}\n${String(headers.tracestate ?? '')}`;
}

export class ForwardedAdds {
  readonly #send: Send;
  #groups = new Map<string, Group>();
  #scheduled = false;
  readonly #flush = (): void => {
    this.#scheduled = false;
    const groups = this.#groups;
    this.#groups = new Map();
    for (const group of groups.values()) this.#sendGroup(group);
  };

  constructor(send: Send) {
    this.#send = send;
  }

  /** Forwards one add (`timer`: its JSON, jsonOf) to the node at `address` with the client's `headers`; `waiter` hears the owner's answer, never synchronously. */
  add(address: string, headers: Headers, timer: string, waiter: ForwardWaiter): void {
    const key = groupKeyOf(address, headers);
    let group = this.#groups.get(key);
    if (group !== undefined && group.bytes + timer.length + 1 > groupBytesMax) {
      this.#groups.delete(key);
      this.#sendGroup(group);
      group = undefined;
    }
    if (group === undefined) {
      group = { address, headers, lines: [], waiters: [], bytes: 0 };
      this.#groups.set(key, group);
    }
    group.lines.push(timer);
    group.waiters.push(waiter);
    group.bytes += timer.length + 1;
    if (group.lines.length >= groupRowsMax) {
      this.#groups.delete(key);
      this.#sendGroup(group);
    } else if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(this.#flush);
    }
  }

  #sendGroup(group: Group): void {
    if (group.lines.length === 1) return this.#sendAlone(group.address, group.headers, group.lines[0] as string, group.waiters[0] as ForwardWaiter);
    const request: ForwardRequest = {
      method: 'POST',
      path: '/v1/timers',
      headers: { ...group.headers, 'content-type': forwardedAddsMediaType, accept: mediaTypes.json },
      body: Buffer.from(group.lines.join('\n')),
    };
    this.#send(group.address, request).then(
      (answer) => this.#answered(group, answer),
      (err: unknown) => {
        for (const waiter of group.waiters) waiter.refused(err);
      },
    );
  }

  #sendAlone(address: string, headers: Headers, timer: string, waiter: ForwardWaiter): void {
    const request: ForwardRequest = { method: 'POST', path: '/v1/timers', headers: { ...headers, 'content-type': mediaTypes.json, accept: mediaTypes.json }, body: Buffer.from(timer) };
    this.#send(address, request).then(
      (answer) => waiter.answered(ownerAnswerOf(answer, parsedBody(answer))),
      (err: unknown) => waiter.refused(err),
    );
  }

  #answered(group: Group, answer: ForwardAnswer): void {
    const { waiters } = group;
    if (answer.status === 415) {
      for (let row = 0; row < waiters.length; row++) this.#sendAlone(group.address, group.headers, group.lines[row] as string, waiters[row] as ForwardWaiter);
      return;
    }
    const body = parsedBody(answer);
    const answers = answer.status === 200 && typeof body === 'object' && body !== null ? (body as { answers?: unknown }).answers : undefined;
    if (answer.status !== 200) {
      // The request refused whole (its token, say): what each add alone would have been told.
      const whole = ownerAnswerOf(answer, body);
      for (const waiter of waiters) waiter.answered(whole);
      return;
    }
    if (!Array.isArray(answers) || answers.length !== waiters.length) {
      const broken = new HttpProblem(httpErrorCodes.internal, `the partition's owner answered ${waiters.length} forwarded adds with something else than their answers`);
      for (const waiter of waiters) waiter.refused(broken);
      return;
    }
    for (let row = 0; row < waiters.length; row++) {
      const one = answers[row] as { status?: unknown; retry_after?: unknown; body?: unknown } | null;
      const retryAfter = one?.retry_after;
      (waiters[row] as ForwardWaiter).answered({
        status: typeof one?.status === 'number' ? one.status : 502,
        retryAfter: typeof retryAfter === 'number' ? String(retryAfter) : undefined,
        wwwAuthenticate: undefined,
        body: one?.body,
      });
    }
  }
}

/** What the owner needs to answer forwarded adds. */
export interface ForwardedAddsHere {
  readonly router: ClusterRouter;
  readonly clock: Clock;
  /** Where an unexpected error (a bug) is logged, as the server's error handler logs it. */
  readonly logError: (err: unknown) => void;
}

/** One row's answer: a one-timer add's status, Retry-After and body. */
type RowAnswer = { readonly status: number; readonly retry_after?: number; readonly body: unknown };

/** One forwarded add's row: the coalescer's waiter, answered as the route answers a one-timer add. */
class Row implements AdmitWaiter {
  readonly #rows: RowAnswers;
  readonly #row: number;
  readonly #partition: number;
  readonly #fireAtMs: number;
  readonly #value: unknown;

  constructor(rows: RowAnswers, row: number, partition: number, fireAtMs: number, value: unknown) {
    this.#rows = rows;
    this.#row = row;
    this.#partition = partition;
    this.#fireAtMs = fireAtMs;
    this.#value = value;
  }

  admitted(id: string, _duplicate: boolean, original: DuplicateAnswer | undefined): void {
    const answer = singleAddAnswer(clusterIdOf(this.#partition, id), original, this.#fireAtMs, this.#value);
    this.#rows.set(this.#row, { status: answer.status, body: answer.body });
  }

  refused(err: unknown): void {
    this.#rows.refuse(this.#row, inJsonTerms(err, undefined));
  }
}

/** The rows' answers as they come; resolves with the answer's JSON text once every row has one. */
class RowAnswers {
  readonly #answers: (RowAnswer | undefined)[];
  readonly #logError: (err: unknown) => void;
  #left: number;
  readonly done = Promise.withResolvers<string>();

  constructor(rows: number, logError: (err: unknown) => void) {
    this.#answers = new Array<RowAnswer | undefined>(rows).fill(undefined);
    this.#left = rows;
    this.#logError = logError;
    if (rows === 0) this.done.resolve('{"answers":[]}');
  }

  set(row: number, answer: RowAnswer): void {
    this.#answers[row] = answer;
    if (--this.#left === 0) this.done.resolve(JSON.stringify({ answers: this.#answers }));
  }

  /** A refusal as the server's error handler answers it (the request's media type being JSON, as a forwarded one-timer add's is). */
  refuse(row: number, err: unknown): void {
    const answer = errorAnswer(err, mediaTypes.json);
    if (answer.unexpected) this.#logError(err);
    this.set(row, answer.retryAfterSeconds === undefined ? { status: answer.status, body: answer.body } : { status: answer.status, retry_after: answer.retryAfterSeconds, body: answer.body });
  }
}

/**
 * The owner's side: each line of `body` (one JSON timer, as jsonOf wrote it) read, checked and
 * routed as the front's route does a forwarded one-timer add (never forwarded again: a partition
 * not owned here is PARTITION_MOVING), the lines admitted in order; resolves with the answer's
 * JSON text once every line has its answer.
 */
export function answerForwardedAdds(body: Buffer, caller: Caller, trace: TraceHeaders | undefined, here: ForwardedAddsHere): Promise<string> {
  const { router, clock } = here;
  const lines = body.toString('utf8').split('\n');
  const rows = new RowAnswers(lines.length, here.logError);
  for (let row = 0; row < lines.length; row++) {
    let value: unknown;
    let spec: TimerSpec;
    let partition: number | undefined;
    try {
      value = JSON.parse(lines[row] as string);
      spec = withTrace(specFromJsonTimer(value, clock.now()), trace);
      checkAddQueues(caller, [spec.queue ?? defaultQueue]);
      partition = router.partitionForAdd(spec.key);
      if (partition === undefined) throw new FermataError(errorCodes.partitionMoving, 'no partition has an owner that can take this timer now: try again');
    } catch (err) {
      rows.refuse(row, err);
      continue;
    }
    const route = router.route(partition);
    if (route.kind !== 'local') {
      rows.refuse(row, new FermataError(errorCodes.partitionMoving, `partition ${partition} is moving between nodes (or its owner is out of reach): try again`));
      continue;
    }
    router.coalescerOf(partition, route.engine).admitOneTo(spec, new Row(rows, row, partition, spec.fireAtMs, value));
  }
  return rows.done.promise;
}
