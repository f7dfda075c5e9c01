// A delivery worker (piscina worker thread): takes a DeliveryTask of many timers, POSTs each
// to its target through this thread's origin clients (warm HTTP/2 sessions per origin), applies
// the retry policy to each answer and returns the outcomes as columns. An "arrow" task is one
// POST of all its timers: its buffers go back once the body is encoded, and its one answer goes
// back as it came, for the main thread to apply each row's policy to. It knows nothing of the
// WAL: the main thread makes the outcomes durable (outcome-recorder.ts). When the pool asks (on
// the BroadcastChannel its workerData names), it warms up: delivery-warm-up.ts.
//
// Delivery request (docs/api.md, "Delivery"): body = payload bytes; the timer's headers;
// fermata-timer-id, fermata-attempt (1-based), fermata-fire-at (epoch ms), idempotency-key (the
// timer's key, else its id: the same on every attempt); Standard Webhooks headers when signing
// secrets are set; a stored traceparent becomes a new child span each attempt (trace-context.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import { BroadcastChannel, parentPort, workerData } from 'node:worker_threads';
import { move, transferableSymbol, valueSymbol } from 'piscina';
import { SharedClockView } from '../engine/clock.ts';
import { traceAttempt } from '../engine/trace-context.ts';
import { LeaseDeadlineView } from '../cluster/lease-deadline.ts';
import { TargetGuard } from './target-guard.ts';
import {
  claimState,
  type BatchAnswer,
  type DeliveryResults,
  type DeliveryTask,
  emptyResults,
  type RefusedTask,
  metaFields,
  notBeforeField,
  responseBytesField,
  resultsTransfer,
  signerField,
  setResultError,
  type SpareBuffersMessage,
  spareBuffersKind,
  taskBytes,
  taskBuffers,
  taskField,
  taskId,
  taskPolicy,
  type WarmedUpMessage,
  warmedUpKind,
  type WarmUpRequest,
  workerLoadedMessage,
} from './delivery-task.ts';
import { exerciseDeliveryPath, openSessions } from './delivery-warm-up.ts';
import { arrowBatchKey, arrowBatchMediaType, encodeArrowBatch, warmUpArrowEncoder } from './arrow-batch.ts';
import { type DeliveryRequest, OriginClients } from './origin-clients.ts';
import { describeFailure, type FailureDescription, failureKind } from './failure-description.ts';
import { attemptFailure, attemptFailureOf, type AttemptResult, decideOutcome, delivered, isSuccess } from './retry-policy.ts';
import type { AddressGuard } from './origin-clients.ts';
import { type DeliveryAccess, type ReconfiguredMessage, reconfiguredKind, type ReconfigureRequest, signersOf } from './signing-config.ts';
import type { WebhookSigner } from './signing.ts';

/** What the dispatcher gives every worker when it starts. */
export interface DeliveryWorkerData {
  /** The allow-list and signing secrets at start; a reload sends new ones on reconfigureChannel. */
  readonly access: DeliveryAccess;
  readonly allowLoopback: boolean;
  /** The BroadcastChannel the pool sends new delivery settings on (ReconfigureRequest). */
  readonly reconfigureChannel: string;
  readonly sessionIdleMsMax: number;
  readonly connectTimeoutMs: number;
  readonly requestsPerOriginMax: number;
  readonly socketsPerOriginMax: number;
  readonly ca?: string;
  /**
   * A manual clock's position in shared memory (engine/clock.ts): retry times and attempt times
   * follow it; absent, they follow the real time. Sending waits (notBefore, translated by the
   * dispatcher), timeouts and webhook-timestamp stay on the real time either way.
   */
  readonly clock?: SharedArrayBuffer;
  /** The BroadcastChannel the pool asks its workers to warm up on (WarmUpRequest). */
  readonly warmUpChannel: string;
  /** Cluster mode: the partitions' local lease deadlines (cluster/lease-deadline.ts), asked before each send of a task that names its partition. */
  readonly leaseDeadlines?: SharedArrayBuffer;
}

const config = workerData as DeliveryWorkerData;
/** Timer time, as the main thread reads it: retry times and attempt times are on it. */
const clock = new SharedClockView(config.clock);
// Replaced whole by a reload (the allow-list); the origin clients ask whichever is in force.
let targetGuard = new TargetGuard({ allow: config.access.allow, allowLoopback: config.allowLoopback });
const guard: AddressGuard = {
  resolveTarget: (url) => targetGuard.resolveTarget(url),
  checkConnectedAddress: (address, origin) => targetGuard.checkConnectedAddress(address, origin),
};
const clientLimits = {
  sessionIdleMsMax: config.sessionIdleMsMax,
  connectTimeoutMs: config.connectTimeoutMs,
  requestsPerOriginMax: config.requestsPerOriginMax,
  socketsPerOriginMax: config.socketsPerOriginMax,
};
const clients = new OriginClients({ ...clientLimits, guard, ca: config.ca });
/** By signer index (dispatch/signing-config.ts); replaced whole by a reload. */
let signers: Array<WebhookSigner | undefined> = signersOf(config.access);
const leases = config.leaseDeadlines === undefined ? undefined : new LeaseDeadlineView(config.leaseDeadlines);
const utf8 = new TextDecoder();
// A fresh thread's first Arrow batch would compile apache-arrow's code on its way out: done now.
warmUpArrowEncoder();
// Unreferenced: the channel alone does not keep this thread alive.
const warmUps = new BroadcastChannel(config.warmUpChannel);
warmUps.unref();
warmUps.addEventListener('message', (event) => void warmUp(event.data as WarmUpRequest));
const reconfigures = new BroadcastChannel(config.reconfigureChannel);
reconfigures.unref();
reconfigures.addEventListener('message', (event) => reconfigure(event.data as ReconfigureRequest));
let exercised = false;
// Loading this module and what it imports (type stripping, apache-arrow) takes a fresh thread a
// few hundred milliseconds: the dispatcher's ready() waits for this word from every worker. It
// is posted once the require that is loading this module has returned, not while it evaluates:
// piscina requires it, and node makes an ES module's CommonJS facade after evaluating it; a
// thread terminated inside that step aborts the whole process (DeliveryPool.destroy waits for
// this word before it terminates workers).
setImmediate(() => parentPort?.postMessage(workerLoadedMessage));

/** Targets repeat (a handful of webhooks take most timers): each is parsed once, up to a bound. */
const parsedUrls = new Map<string, URL>();
const parsedUrlsMax = 10_000;

function urlOf(target: string): URL {
  let url = parsedUrls.get(target);
  if (url === undefined) {
    if (parsedUrls.size >= parsedUrlsMax) parsedUrls.clear();
    url = new URL(target);
    parsedUrls.set(target, url);
  }
  return url;
}

export default async function deliver(task: DeliveryTask): Promise<DeliveryResults | BatchAnswer | RefusedTask> {
  if (task.sink !== undefined) {
    if (task.notBeforeMsMax > Date.now()) await untilWallClock(task.notBeforeMsMax);
    if (!maySend(task)) return { refused: true };
    return deliverArrowBatch(task, task.sink);
  }
  return deliverThrough(task, clients);
}

/** The pool asked for a warm-up (delivery-warm-up.ts): the delivery path run once, then sessions opened to `origins`. */
async function warmUp(request: WarmUpRequest): Promise<void> {
  const failures: string[] = [];
  if (!exercised) {
    exercised = true;
    // A warm-up that fails costs speed, not deliveries: it is told, and the worker goes on.
    await exerciseDeliveryPath(deliverThrough, clientLimits, request.exerciseTarget).catch((err: unknown) => failures.push(`the delivery path's warm-up: ${err instanceof Error ? err.message : String(err)}`));
  }
  const sessions = await openSessions(clients, request.origins, request.connectWaitMs);
  const done: WarmedUpMessage = { kind: warmedUpKind, sessionsOpened: sessions.opened, failures: [...failures, ...sessions.failures] };
  parentPort?.postMessage(done);
}

/** A reload's new allow-list and secrets: built first, so a bad one leaves the old in force. */
function reconfigure(request: ReconfigureRequest): void {
  let failure: string | undefined;
  try {
    const nextGuard = new TargetGuard({ allow: request.access.allow, allowLoopback: config.allowLoopback });
    const nextSigners = signersOf(request.access);
    targetGuard = nextGuard;
    signers = nextSigners;
  } catch (err) {
    failure = err instanceof Error ? err.message : String(err);
  }
  const answer: ReconfiguredMessage = { kind: reconfiguredKind, id: request.id, failure };
  parentPort?.postMessage(answer);
}

/** A task of single deliveries, each timer POSTed through `using`. */
async function deliverThrough(task: DeliveryTask, using: OriginClients): Promise<DeliveryResults> {
  const results = emptyResults(task.count);
  // Timers come in the order they fall due, and a task's may not be due yet (the dispatcher
  // takes them ahead): each is sent once the wall clock reaches its time, unless the
  // dispatcher withdrew it (a cancel) before that; the earlier ones are meanwhile on their way.
  const sends: Array<Promise<void>> = [];
  const claims = task.claims;
  const texts = new Map<string, number>();
  for (let at = 0; at < task.count; at++) {
    const notBeforeMs = task.meta[at * metaFields + notBeforeField] as number;
    if (notBeforeMs > Date.now()) await untilWallClock(notBeforeMs);
    if (claims !== undefined) {
      // A cancel may have withdrawn it meanwhile; past the lease deadline it is refused, not sent.
      const claim = maySend(task) ? claimState.sent : claimState.refused;
      if (Atomics.compareExchange(claims, at, claimState.held, claim) !== claimState.held || claim === claimState.refused) continue;
    }
    sends.push(deliverOne(task, at, results, texts, using));
  }
  await Promise.all(sends);
  // piscina moves the result columns to the main thread (transferred, not copied).
  return move({ [transferableSymbol]: resultsTransfer(results), [valueSymbol]: results }) as unknown as DeliveryResults;
}

/** Cluster mode: false (a refused send, counted) once the task's partition's local lease deadline has passed; true outside cluster mode. */
function maySend(task: DeliveryTask): boolean {
  return leases === undefined || task.partition === undefined || leases.maySend(task.partition);
}

/**
 * Resolves once Date.now() ≥ `ms`. A timer fires up to a millisecond early or late by the
 * wall clock (the loop keeps its own), so the wall clock is read again each time.
 */
async function untilWallClock(ms: number): Promise<void> {
  for (let left = ms - Date.now(); left > 0; left = ms - Date.now()) await sleep(left);
}

/**
 * One timer's attempt. Whatever happens to it (a thrown error included) is its own outcome:
 * one timer never fails the task, whose other timers may already be delivered.
 */
async function deliverOne(task: DeliveryTask, at: number, results: DeliveryResults, texts: Map<string, number>, using: OriginClients): Promise<void> {
  const takenAtMs = Date.now();
  // When the request really went out, after its turn in line for the target: lateness and latency count from there.
  const timing = { sentAtMs: NaN };
  let result: AttemptResult;
  let retryAfter: string | undefined;
  try {
    const request = deliveryRequest(task, at, takenAtMs, timing);
    const answer = await using.send(request);
    result = answer.status;
    retryAfter = answer.retryAfter;
    if (answer.body !== undefined) (results.responses ??= [])[at] = answer.body;
  } catch (err) {
    result = attemptFailureOf(err);
    const failure = describeFailure(err, task.meta[at * metaFields + 2] as number);
    setResultError(results, at, failure.kind, failure.text, texts);
  }
  recordOutcome(task, at, results, result, retryAfter, Number.isNaN(timing.sentAtMs) ? takenAtMs : timing.sentAtMs);
  if (typeof result === 'number' && !isSuccess(result)) {
    // An answered status needs no words here (the main thread spells it from the status column).
    if (results.statuses[at] !== 0) results.failureKinds[at] = failureKind.status;
    else setResultError(results, at, failureKind.other, `a status outside 100–599 (${result})`, texts);
  }
}

function deliveryRequest(task: DeliveryTask, at: number, startedAtMs: number, timing: { sentAtMs: number }): DeliveryRequest {
  const fireAtMs = task.meta[at * metaFields] as number;
  const attempt = task.meta[at * metaFields + 1] as number;
  const timeoutMs = task.meta[at * metaFields + 2] as number;
  const id = taskId(task, at);
  const key = taskBytes(task, at, taskField.key);
  const body = taskBytes(task, at, taskField.payload);
  const headers: Record<string, string> = { 'content-type': 'application/octet-stream' };
  // Header names are case-insensitive: merged lower-case, so a timer's Content-Type replaces the default instead of doubling it.
  for (const [name, value] of Object.entries(parseHeaders(taskBytes(task, at, taskField.headers)))) headers[name.toLowerCase()] = value;
  traceAttempt(headers);
  headers['fermata-timer-id'] = id;
  headers['fermata-attempt'] = String(attempt);
  headers['fermata-fire-at'] = String(fireAtMs);
  headers['idempotency-key'] = key.length === 0 ? id : idempotencyKeyHeader(utf8.decode(key));
  const signer = signers[task.meta[at * metaFields + signerField] as number];
  if (signer !== undefined) Object.assign(headers, signer.sign(id, Math.floor(startedAtMs / 1000), body));
  const responseBytesMax = task.meta[at * metaFields + responseBytesField] as number;
  return { url: urlOf(utf8.decode(taskBytes(task, at, taskField.target))), headers, body, timeoutMs, timing, responseBytesMax };
}

/**
 * A key as a header value: as it is when it is visible ASCII (the usual case), otherwise its
 * UTF-8 percent-encoded (HTTP/1.1 refuses other bytes, HTTP/2 would truncate each character to
 * a byte and make two keys one).
 */
function idempotencyKeyHeader(key: string): string {
  return /^[\x21-\x7e]+$/.test(key) ? key : encodeURIComponent(key);
}

/**
 * "arrow" delivery: every timer of the task in one Arrow record batch, one POST; its answer is
 * every row's, and the outcome recorder applies each row's retry policy to it.
 */
async function deliverArrowBatch(task: DeliveryTask, sink: string): Promise<BatchAnswer> {
  const body = encodeArrowBatch(task);
  const batchKey = arrowBatchKey(task);
  const timeoutMs = task.timeoutMsMax;
  const rows = task.count;
  // An Arrow batch is one queue's: its first row's signer is every row's (read before the buffers go back).
  const signer = signers[task.meta[signerField] as number];
  // The body is a copy, and nothing after this reads the task: all its buffers go back to the
  // dispatcher now, for the next tasks, not after the sink has answered (tens of milliseconds for
  // a few MiB).
  const buffers = taskBuffers(task);
  const spare: SpareBuffersMessage = { kind: spareBuffersKind, buffers };
  parentPort?.postMessage(spare, buffers);
  const headers: Record<string, string> = { 'content-type': arrowBatchMediaType, 'fermata-batch-rows': String(rows), 'idempotency-key': batchKey };
  const startedAtMs = Date.now();
  if (signer !== undefined) Object.assign(headers, signer.sign(batchKey, Math.floor(startedAtMs / 1000), body));
  let result: AttemptResult;
  let retryAfter: string | undefined;
  let failure: FailureDescription | undefined;
  try {
    const answer = await clients.send({ url: urlOf(sink), headers, body, timeoutMs });
    result = answeredStatus(answer.status);
    retryAfter = answer.retryAfter;
    if (typeof result !== 'number') failure = { kind: failureKind.other, text: `a status outside 100–599 (${answer.status})` };
  } catch (err) {
    result = attemptFailureOf(err);
    failure = describeFailure(err, timeoutMs);
  }
  return { batch: { result, retryAfter, startedAtMs: clock.at(startedAtMs), durationMs: Date.now() - startedAtMs, failure } };
}

/** A status outside HTTP's 100–599 (an HTTP/1.1 parser lets "099" through) is a broken answer, not a status. */
function answeredStatus(status: number): AttemptResult {
  return status >= 100 && status <= 599 ? status : attemptFailure.networkError;
}

/** Timer `at`'s outcome under its own attempt number and queue policy. */
function recordOutcome(task: DeliveryTask, at: number, results: DeliveryResults, result: AttemptResult, retryAfter: string | undefined, startedAtMs: number): void {
  const realNowMs = Date.now();
  const nowMs = clock.now();
  const attempt = task.meta[at * metaFields + 1] as number;
  const answered = typeof result === 'number' ? answeredStatus(result) : result;
  // A 2xx needs no policy: none is built per row then (an Arrow batch's rows share one answer).
  const decision = isSuccess(answered) ? delivered : decideOutcome(attempt, answered, retryAfter, taskPolicy(task, at), nowMs, Math.random(), realNowMs);
  results.kinds[at] = decision.kind;
  results.reasons[at] = decision.reason;
  results.statuses[at] = typeof answered === 'number' ? answered : 0;
  results.retryAtMs[at] = 'retryAtMs' in decision ? decision.retryAtMs : 0;
  results.startedAtMs[at] = clock.at(startedAtMs);
  results.durationMs[at] = realNowMs - startedAtMs;
}

function parseHeaders(bytes: Uint8Array): Record<string, string> {
  // Validated as a JSON object of strings when the timer was admitted.
  return bytes.length === 0 ? {} : (JSON.parse(utf8.decode(bytes)) as Record<string, string>);
}
