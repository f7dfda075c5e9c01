// FermataClient: the typed client of one fermata server. Every call is one HTTP request on the
// shared transport (one HTTP/2 session, or HTTP/1.1 keep-alive), retried on 429/503 as the retry
// policy says; a refusal is thrown as a FermataError with the server's code. `add` rides one
// shared add stream under HTTP/2 and is one `POST /v1/timers` under HTTP/1.1; `addMany` sends
// Arrow batches cut at the server's `GET /v1/limits`. Lists are async iterators over the
// server's cursor. Runs on the caller's event loop.
import { AddStream } from './add-stream.ts';
import { arrowPieces } from './arrow-batches.ts';
import { errorFromAnswer, FermataError } from './errors.ts';
import { defaultRetryPolicy, isRetryable, retryAfterOf, retryDelayMs, type RetryPolicy, sleep } from './retry.ts';
import { type Answer, type Headers, type Protocol, type TlsOptions, Transport } from './transport.ts';
import type {
  BatchAdded,
  BulkCancelFilter,
  BulkCancelled,
  Cancelled,
  ClockMove,
  DeadFilter,
  DeadTimer,
  DuplicateRow,
  Limits,
  Queue,
  QueueWithCounts,
  QueueConfig,
  QueueDeleted,
  Schedule,
  ScheduleDeleted,
  ScheduleInput,
  Stats,
  TestClock,
  TimeInput,
  Timer,
  TimerAdded,
  TimerChanges,
  TimerFilter,
  TimerInput,
} from './types.ts';

export interface ClientOptions {
  /** The server's base URL: `http://127.0.0.1:7070`, `https://timers.example`. */
  readonly url: string | URL;
  /** A bearer token, sent as `authorization: Bearer <token>`. */
  readonly token?: string;
  /** For an https:// URL: a private CA, a client certificate, a server name. */
  readonly tls?: TlsOptions;
  /** `auto` (default): HTTP/2 when the server speaks it, else HTTP/1.1. */
  readonly protocol?: 'auto' | Protocol;
  /** Retries of 429 and 503 answers (default: 5 retries, waits of at most 30 s). */
  readonly retry?: Partial<RetryPolicy>;
  /** How long connecting may take (default 10 s). */
  readonly connectTimeoutMs?: number;
  /** How long one request may wait for its answer (default 60 s). */
  readonly requestTimeoutMs?: number;
  /** The shared add stream's request ends after this long without a line waiting (default 100 ms). */
  readonly addStreamIdleMs?: number;
  /** Arrow batches of one `addMany` in flight at once (default 2). */
  readonly batchConcurrency?: number;
}

/** `addMany`'s answer: `ids` and `revisions` in the order of the rows given; `duplicate_rows` name those rows. */
export type AddManyResult = BatchAdded;

export interface CancelOptions {
  /** Cancel only while the timer is at this revision (If-Match); else 412 REVISION_MISMATCH. */
  readonly revision?: number;
}

export interface ListOptions {
  /** Timers fetched a page (1 to 1,000; default 100). */
  readonly pageSize?: number;
}

const json = 'application/json';
const arrowStream = 'application/vnd.apache.arrow.stream';

export class FermataClient {
  readonly #transport: Transport;
  readonly #headers: Headers;
  readonly #retry: RetryPolicy;
  readonly #batchConcurrency: number;
  readonly #adds: AddStream;
  #limits: Promise<Limits> | undefined;
  /** Set once the server answered that it does not serve the add stream (cluster mode): adds go one request each. */
  #streamRefused = false;

  constructor(options: ClientOptions) {
    const url = new URL(options.url);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`url must be http:// or https://, not ${url.protocol}`);
    this.#transport = new Transport({
      url,
      protocol: options.protocol ?? 'auto',
      tls: options.tls ?? {},
      connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
      requestTimeoutMs: options.requestTimeoutMs ?? 60_000,
    });
    this.#headers = options.token === undefined ? {} : { authorization: `Bearer ${options.token}` };
    this.#retry = { ...defaultRetryPolicy, ...options.retry };
    this.#batchConcurrency = options.batchConcurrency ?? 2;
    this.#adds = new AddStream({ transport: this.#transport, headers: this.#headers, retry: this.#retry, idleMs: options.addStreamIdleMs ?? 100 });
  }

  /** The protocol the server is spoken to in: `h2` or `http/1.1`. */
  protocol(): Promise<Protocol> {
    return this.#transport.protocol();
  }

  /**
   * Adds one timer; resolves once it is durable. A known `key` resolves with the original
   * (`duplicate: true`, its `state` and the fields that `differs`).
   */
  async add(timer: TimerInput): Promise<TimerAdded> {
    if ((await this.protocol()) === 'h2' && !this.#streamRefused) {
      try {
        return await this.#adds.add(timer);
      } catch (err) {
        // A server that does not serve the stream (cluster mode) refuses the request, not a line: add one request each from now on.
        if (!(err instanceof FermataError && err.line === undefined && [404, 405, 501].includes(err.status))) throw err;
        this.#streamRefused = true;
      }
    }
    return this.#json<TimerAdded>('POST', '/v1/timers', timer);
  }

  /**
   * Adds many timers as Arrow record batches, cut at the server's limits and sent a few at a
   * time; each batch is accepted or refused whole. Resolves with every row's id in the order
   * given. A refused batch rejects with its FermataError (its `row` counted among `rows`);
   * the batches before it are durable.
   */
  async addMany(rows: readonly TimerInput[]): Promise<AddManyResult> {
    const result: AddManyResult = { accepted: 0, duplicates: 0, ids: new Array<string>(rows.length), revisions: new Array<number>(rows.length), duplicate_rows: [] };
    if (rows.length === 0) return result;
    const pieces = arrowPieces(rows, await this.limits());
    const duplicates: DuplicateRow[] = [];
    // Once a batch is refused no further one is sent: the caller learns where it stopped.
    let refused = false;
    const worker = async (): Promise<void> => {
      for (let next = pieces.next(); next.done !== true && !refused; next = pieces.next()) {
        const piece = next.value;
        let answer: BatchAdded;
        try {
          answer = await this.addArrow(piece.body);
        } catch (err) {
          refused = true;
          throw err instanceof FermataError ? err.shiftedBy(piece.start) : err;
        }
        result.accepted += answer.accepted;
        result.duplicates += answer.duplicates;
        for (let i = 0; i < piece.rows; i++) {
          result.ids[piece.start + i] = answer.ids[i] as string;
          result.revisions[piece.start + i] = answer.revisions[i] as number;
        }
        for (const row of answer.duplicate_rows) duplicates.push({ ...row, row: row.row + piece.start });
      }
    };
    await Promise.all(Array.from({ length: this.#batchConcurrency }, worker));
    result.duplicate_rows = duplicates.sort((a, b) => a.row - b.row);
    return result;
  }

  /**
   * Adds the timers of one Arrow IPC stream as it is (columns as `POST /v1/timers` takes them:
   * docs/api.md), accepted or refused whole; resolves with every row's id in order. The caller
   * keeps it within `limits()` (`arrowPieces` cuts rows that way); `addMany` does both.
   */
  addArrow(ipc: Uint8Array): Promise<BatchAdded> {
    return this.#json<BatchAdded>('POST', '/v1/timers', ipc, arrowStream);
  }

  /**
   * A stream of single adds of its own (`POST /v1/timers/stream`): each `add` resolves once that
   * timer is durable. `close()` it when done.
   */
  stream(): AddStream {
    return new AddStream({ transport: this.#transport, headers: this.#headers, retry: this.#retry, idleMs: Infinity });
  }

  get(id: string): Promise<Timer> {
    return this.#json<Timer>('GET', `/v1/timers/${encodeURIComponent(id)}`);
  }

  /** Cancels a pending or retrying timer (again for one already cancelled). */
  cancel(id: string, options: CancelOptions = {}): Promise<Cancelled> {
    return this.#json<Cancelled>('DELETE', `/v1/timers/${encodeURIComponent(id)}`, undefined, json, ifMatch(options.revision));
  }

  /**
   * Changes a pending or retrying timer (PATCH): its fire time, payload, headers, target, queue
   * or callbacks. With `revision`, only while the timer is at that revision (else 412
   * REVISION_MISMATCH): read, decide, change without losing another writer's change.
   */
  reschedule(id: string, changes: TimerChanges, options: CancelOptions = {}): Promise<Timer> {
    return this.#json<Timer>('PATCH', `/v1/timers/${encodeURIComponent(id)}`, changes, json, ifMatch(options.revision));
  }

  /** Every timer the filter matches, by when it is next due, fetched a page at a time. */
  list(filter: TimerFilter = {}, options: ListOptions = {}): AsyncIterableIterator<Timer> {
    const query: Record<string, string> = {};
    for (const [name, value] of Object.entries(filter) as Array<[string, string | TimeInput | undefined]>) if (value !== undefined) query[name] = timeParam(value);
    if (options.pageSize !== undefined) query.limit = String(options.pageSize);
    return this.#pages<Timer>('/v1/timers', query, 'timers');
  }

  /** Cancels every pending and retrying timer a filter (or a list of `ids`) names, in one durable record. */
  cancelMany(filter: BulkCancelFilter): Promise<BulkCancelled> {
    return this.#json<BulkCancelled>('POST', '/v1/timers/cancel', filter);
  }

  async queues(): Promise<QueueWithCounts[]> {
    return (await this.#json<{ queues: QueueWithCounts[] }>('GET', '/v1/queues')).queues;
  }

  queue(name: string): Promise<Queue> {
    return this.#json<Queue>('GET', `/v1/queues/${encodeURIComponent(name)}`);
  }

  /** Sets a queue's whole config (fields left out take their defaults). */
  setQueue(name: string, config: QueueConfig): Promise<Queue> {
    return this.#json<Queue>('PUT', `/v1/queues/${encodeURIComponent(name)}`, config);
  }

  pauseQueue(name: string): Promise<Queue> {
    return this.#json<Queue>('POST', `/v1/queues/${encodeURIComponent(name)}/pause`);
  }

  resumeQueue(name: string): Promise<Queue> {
    return this.#json<Queue>('POST', `/v1/queues/${encodeURIComponent(name)}/resume`);
  }

  deleteQueue(name: string): Promise<QueueDeleted> {
    return this.#json<QueueDeleted>('DELETE', `/v1/queues/${encodeURIComponent(name)}`);
  }

  /** Cancels the queue's waiting timers; the queue stays. */
  purgeQueue(name: string): Promise<BulkCancelled> {
    return this.#json<BulkCancelled>('DELETE', `/v1/queues/${encodeURIComponent(name)}/timers`);
  }

  /** Dead timers, oldest first, fetched a page at a time. */
  dead(filter: DeadFilter = {}, options: ListOptions = {}): AsyncIterableIterator<DeadTimer> {
    const query: Record<string, string> = {};
    if (filter.queue !== undefined) query.queue = filter.queue;
    if (options.pageSize !== undefined) query.limit = String(options.pageSize);
    return this.#pages<DeadTimer>('/v1/dead', query, 'dead');
  }

  /** Redrives a dead timer: due now, its attempts reset. */
  retryDead(id: string): Promise<{ id: string; state: 'pending' }> {
    return this.#json('POST', `/v1/dead/${encodeURIComponent(id)}/retry`);
  }

  /** Discards a dead timer at once. */
  discardDead(id: string): Promise<{ id: string; state: 'discarded' }> {
    return this.#json('DELETE', `/v1/dead/${encodeURIComponent(id)}`);
  }

  /** Creates or replaces a recurring schedule. */
  setSchedule(name: string, schedule: ScheduleInput): Promise<Schedule> {
    return this.#json<Schedule>('PUT', `/v1/schedules/${encodeURIComponent(name)}`, schedule);
  }

  schedule(name: string): Promise<Schedule> {
    return this.#json<Schedule>('GET', `/v1/schedules/${encodeURIComponent(name)}`);
  }

  schedules(options: ListOptions = {}): AsyncIterableIterator<Schedule> {
    return this.#pages<Schedule>('/v1/schedules', options.pageSize === undefined ? {} : { limit: String(options.pageSize) }, 'schedules');
  }

  deleteSchedule(name: string): Promise<ScheduleDeleted> {
    return this.#json<ScheduleDeleted>('DELETE', `/v1/schedules/${encodeURIComponent(name)}`);
  }

  pauseSchedule(name: string): Promise<Schedule> {
    return this.#json<Schedule>('POST', `/v1/schedules/${encodeURIComponent(name)}/pause`);
  }

  resumeSchedule(name: string): Promise<Schedule> {
    return this.#json<Schedule>('POST', `/v1/schedules/${encodeURIComponent(name)}/resume`);
  }

  stats(): Promise<Stats> {
    return this.#json<Stats>('GET', '/v1/stats');
  }

  /** Where the test clock stands: a service started with `--clock manual` only (404 `ROUTE_NOT_FOUND` otherwise). */
  clock(): Promise<TestClock> {
    return this.#json<TestClock>('GET', '/v1/clock');
  }

  /** Moves the test clock forward, once durable; timers it makes due go out at once. */
  moveClock(move: ClockMove): Promise<TestClock> {
    return this.#json<TestClock>('POST', '/v1/clock', move);
  }

  /** The server's limits (`GET /v1/limits`), asked once and remembered. */
  limits(): Promise<Limits> {
    this.#limits ??= this.#json<Limits>('GET', '/v1/limits').catch((err: unknown) => {
      this.#limits = undefined;
      throw err;
    });
    return this.#limits;
  }

  /** Ends the shared add stream (once its lines are answered) and the connection. */
  async close(): Promise<void> {
    await this.#adds.close();
    await this.#transport.close();
  }

  /** One request with a JSON answer, retried on 429/503 by the policy; a non-2xx answer is thrown. */
  async #json<T>(method: string, path: string, body?: object | Uint8Array, type: string = json, extra: Headers = {}): Promise<T> {
    const bytes = body === undefined ? undefined : body instanceof Uint8Array ? body : Buffer.from(JSON.stringify(body));
    const headers: Headers = { ...this.#headers, accept: json, ...extra, ...(bytes === undefined ? {} : { 'content-type': type }) };
    for (let retry = 0; ; retry++) {
      const answer = await this.#transport.request(method, path, headers, bytes);
      if (answer.status >= 200 && answer.status < 300) return JSON.parse(answer.body.toString('utf8')) as T;
      const error = errorOf(answer);
      const delay = isRetryable(answer.status) ? retryDelayMs(this.#retry, retry, error.retryAfterS) : undefined;
      if (delay === undefined) throw error;
      await sleep(delay);
    }
  }

  async *#pages<T>(path: string, query: Record<string, string>, field: string): AsyncGenerator<T> {
    let cursor: string | null = null;
    do {
      const params = new URLSearchParams(cursor === null ? query : { ...query, cursor });
      const page: Record<string, unknown> = await this.#json<Record<string, unknown>>('GET', params.size === 0 ? path : `${path}?${params}`);
      yield* page[field] as T[];
      cursor = page.next_cursor as string | null;
    } while (cursor !== null);
  }
}

function errorOf(answer: Answer): FermataError {
  return errorFromAnswer(answer.status, answer.body, retryAfterOf(answer.headers['retry-after']));
}

function ifMatch(revision: number | undefined): Headers {
  return revision === undefined ? {} : { 'if-match': `"${revision}"` };
}

function timeParam(value: string | TimeInput): string {
  return value instanceof Date ? value.toISOString() : String(value);
}
