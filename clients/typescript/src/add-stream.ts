// Single adds over `POST /v1/timers/stream`: each add is one NDJSON line written on a long
// request, and its promise settles when the server's answer line for it comes (written once the
// timer is durable). Many concurrent adds share one request, so they cost one HTTP/2 stream and
// ride the server's group commit together.
//
//   add() ─▶ line n ─▶ [request body] ═══▶ server ═══▶ [answer body] ─▶ {"line": n, …} ─▶ settle
//
// A line answered 429 or 503 is sent again alone, as a new line, after its `retry_after_s`
// (bounded by the retry policy). When the server stops (a last line without `line`), the lines
// it did not answer were not read, so they too go again on a new request. When the connection
// breaks, unanswered lines may or may not have been added: they fail with STREAM_ENDED.
// A stream with no line waiting ends its request after `idleMs`, and opens a new one at the
// next add. Runs on the caller's event loop.
import { createInterface } from 'node:readline';
import { clientErrorCodes, errorFromAnswer, FermataError } from './errors.ts';
import { isRetryable, retryAfterOf, retryDelayMs, type RetryPolicy } from './retry.ts';
import type { Exchange, Headers, Transport } from './transport.ts';
import type { StreamAnswer, TimerAdded, TimerInput } from './types.ts';

interface Waiting {
  readonly text: string;
  readonly resolve: (added: TimerAdded) => void;
  readonly reject: (err: FermataError) => void;
  retries: number;
}

export interface AddStreamOptions {
  readonly transport: Transport;
  readonly headers: Headers;
  readonly retry: RetryPolicy;
  /** The request ends after this long with no line waiting (Infinity: only at close()). */
  readonly idleMs: number;
}

export class AddStream {
  readonly #options: AddStreamOptions;
  #lane: Lane | undefined;
  /** Lines waiting out a Retry-After before they are sent again. */
  #delayed = 0;
  #closed = false;

  constructor(options: AddStreamOptions) {
    this.#options = options;
  }

  /** Adds one timer; resolves once it is durable (or its key was known), rejects with a FermataError. */
  add(timer: TimerInput): Promise<TimerAdded> {
    if (this.#closed) return Promise.reject(new FermataError(0, { code: clientErrorCodes.streamEnded, message: 'this add stream is closed' }));
    return new Promise((resolve, reject) => this.#send({ text: JSON.stringify(timer), resolve, reject, retries: 0 }));
  }

  /** Ends the request once every line sent has its answer. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#lane?.end();
  }

  #send(waiting: Waiting): void {
    if (this.#lane === undefined || this.#lane.ending) this.#lane = new Lane(this.#options, (lane, left, cause, stopped) => this.#laneDone(lane, left, cause, stopped), (line) => this.#refused(line), () => this.#delayed > 0);
    this.#lane.write(waiting);
  }

  /** A line's 429 or 503: send it again after the wait, or fail it once the policy says no more. */
  #refused({ waiting, status, error }: { waiting: Waiting; status: number; error: FermataError }): void {
    const delay = isRetryable(status) ? retryDelayMs(this.#options.retry, waiting.retries, error.retryAfterS) : undefined;
    if (delay === undefined) return waiting.reject(error);
    waiting.retries++;
    this.#delayed++;
    setTimeout(() => {
      this.#delayed--;
      this.#send(waiting);
    }, delay);
  }

  /** A lane ended: lines it left unanswered go again when the server stopped reading them, else fail. */
  #laneDone(lane: Lane, left: Waiting[], cause: FermataError, stopped: boolean): void {
    if (this.#lane === lane) this.#lane = undefined;
    for (const waiting of left) {
      if (stopped || isRetryable(cause.status)) this.#refused({ waiting, status: stopped ? 503 : cause.status, error: cause });
      else waiting.reject(cause);
    }
  }

  /** Lines sent and not yet answered, and lines waiting to be sent again. */
  get waiting(): number {
    return (this.#lane?.size ?? 0) + this.#delayed;
  }
}

type Refusal = { waiting: Waiting; status: number; error: FermataError };

/** One `POST /v1/timers/stream` request and the lines sent on it. */
class Lane {
  readonly #pending = new Map<number, Waiting>();
  readonly #options: AddStreamOptions;
  readonly #exchange: Promise<Exchange>;
  readonly #done: Promise<void>;
  #nextLine = 1;
  #idle: NodeJS.Timeout | undefined;
  ending = false;

  /** Whether lines wait out a Retry-After to be sent again: the lane is not idle then. */
  readonly #retriesWaiting: () => boolean;

  constructor(options: AddStreamOptions, onDone: (lane: Lane, left: Waiting[], cause: FermataError, stopped: boolean) => void, onRefused: (refusal: Refusal) => void, retriesWaiting: () => boolean) {
    this.#options = options;
    this.#retriesWaiting = retriesWaiting;
    this.#exchange = options.transport.exchange('POST', '/v1/timers/stream', { ...options.headers, 'content-type': 'application/x-ndjson' });
    this.#done = this.#read(onRefused).then(
      ({ cause, stopped }) => {
        this.ending = true;
        clearTimeout(this.#idle);
        // The answer ended first (the server stopped, or refused the request): drop our half too.
        void this.#exchange.then((exchange) => (exchange.body.writableEnded ? undefined : exchange.abort()), () => undefined);
        const left = [...this.#pending.values()];
        this.#pending.clear();
        onDone(this, left, cause, stopped);
      },
    );
  }

  get size(): number {
    return this.#pending.size;
  }

  write(waiting: Waiting): void {
    clearTimeout(this.#idle);
    const line = this.#nextLine++;
    this.#pending.set(line, waiting);
    void this.#exchange.then(
      (exchange) => exchange.body.write(`${waiting.text}\n`),
      () => undefined, // #read reports the failed open for every line
    );
  }

  /** Ends the request body; resolves once the answer has ended. */
  async end(): Promise<void> {
    this.ending = true;
    clearTimeout(this.#idle);
    await this.#exchange.then((exchange) => exchange.body.end(), () => undefined);
    await this.#done;
  }

  /** Reads answer lines until the answer ends; says why it ended and whether the server stopped reading. */
  async #read(onRefused: (refusal: Refusal) => void): Promise<{ cause: FermataError; stopped: boolean }> {
    const ended = (cause?: Error): FermataError =>
      new FermataError(0, { code: clientErrorCodes.streamEnded, message: 'the add stream ended before this line was answered: the timer may or may not have been added' }, undefined, cause === undefined ? undefined : { cause });
    let opened = false;
    try {
      const exchange = await this.#exchange;
      opened = true;
      const answer = await exchange.answer;
      if (answer.status !== 200) {
        const chunks: Buffer[] = [];
        for await (const chunk of answer.body) chunks.push(chunk as Buffer);
        return { cause: errorFromAnswer(answer.status, Buffer.concat(chunks), retryAfterOf(answer.headers['retry-after'])), stopped: false };
      }
      for await (const text of createInterface({ input: answer.body, crlfDelay: Infinity })) {
        if (text === '') continue;
        const parsed = JSON.parse(text) as StreamAnswer;
        if (parsed.line === undefined) {
          // The service stopped: every line it read is answered above; the rest were never read.
          return { cause: lineError(parsed), stopped: true };
        }
        const waiting = this.#pending.get(parsed.line);
        if (waiting === undefined) continue;
        this.#pending.delete(parsed.line);
        if (parsed.status === 200 || parsed.status === 201) waiting.resolve(addedOf(parsed));
        else onRefused({ waiting, status: parsed.status, error: lineError(parsed) });
        this.#idleCheck();
      }
    } catch (err) {
      // Before the request was opened nothing was sent (CONNECTION_FAILED says so); after it, lines were.
      if (!opened && err instanceof FermataError) return { cause: err, stopped: false };
      return { cause: ended(err instanceof Error ? err : undefined), stopped: false };
    }
    return { cause: ended(), stopped: false };
  }

  #idleCheck(): void {
    if (this.#pending.size > 0 || this.ending || !Number.isFinite(this.#options.idleMs)) return;
    clearTimeout(this.#idle);
    this.#idle = setTimeout(() => {
      if (this.#pending.size === 0 && !this.#retriesWaiting()) void this.end();
      else this.#idleCheck();
    }, this.#options.idleMs);
    this.#idle.unref();
  }
}

function addedOf(answer: StreamAnswer): TimerAdded {
  const added: TimerAdded = { id: answer.id as string, fire_at: answer.fire_at as string, revision: answer.revision as number, duplicate: answer.duplicate === true };
  if (answer.state !== undefined) added.state = answer.state;
  if (answer.differs !== undefined) added.differs = answer.differs;
  return added;
}

function lineError(answer: StreamAnswer): FermataError {
  const error = answer.error ?? { code: clientErrorCodes.unexpectedAnswer, message: `status ${answer.status} without an error` };
  return new FermataError(answer.status, { ...error, ...(answer.line === undefined ? {} : { line: answer.line }) }, answer.retry_after_s);
}
