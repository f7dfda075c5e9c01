// An HTTP/2 load generator for `POST /v1/timers`: a few sessions, many streams, bodies from a
// prebuilt pool sent in turn. Runs on the caller's main thread (the bench command, the compare
// suite); every wait is bounded.
//
// Closed loop (no rate): `concurrency` streams kept busy; a request is sent when one finishes;
// latency runs from send to the end of the answer.
//
// Open loop (a rate): request i is due at start + i / rate whatever happened before it, and
// its latency runs from that intended time, not from when it went out. When all `concurrency`
// streams are busy the due requests wait, and that wait is part of their latency: a slow
// server shows as high latency rather than as fewer, well-served requests (coordinated
// omission, as wrk2 corrects it). Requests due before the end are all sent, also after it,
// until the drain bound.
//
//          warm-up         measured span                 drain (answers to what was sent)
//   start ───────── measureStart ──────────── end ─────────────── all answered | drainTimeoutMs
//
// Rates count answers that complete inside the measured span; latencies every 2xx of a request
// due (open loop) or sent (closed loop) after the warm-up; totals and errors the whole run.
import http2 from 'node:http2';
import { performance } from 'node:perf_hooks';
import * as hdr from 'hdr-histogram-js';
import type { RequestBody } from './timer-bodies.ts';

export interface LoadOptions {
  /** Base URL of a fermata (http:// or https://); requests go to its /v1/timers. */
  readonly url: string;
  /** Bearer token, when the server asks for one. */
  readonly token: string | undefined;
  /** Bodies sent in turn. */
  readonly bodies: readonly RequestBody[];
  /** Streams in flight at most, over all sessions. */
  readonly concurrency: number;
  /** HTTP/2 sessions the streams are spread over. */
  readonly connections: number;
  /** Requests a second (open loop), or undefined (closed loop). */
  readonly ratePerS: number | undefined;
  readonly warmupMs: number;
  readonly durationMs: number;
  /** After the end, how long answers to requests already sent (or due) are waited for. */
  readonly drainTimeoutMs: number;
}

export interface LoadResult {
  /** Requests sent (warm-up included). */
  readonly sent: number;
  /** 2xx answers, and the timers they acknowledged (warm-up included): what the server now holds. */
  readonly okRequests: number;
  readonly okTimers: number;
  /** 2xx answers completing inside the measured span, and their timers. */
  readonly spanOkRequests: number;
  readonly spanOkTimers: number;
  readonly spanSeconds: number;
  /** From the start (warm-up included) to the last answer: with no warm-up, okTimers ÷ this counts every batch in full. */
  readonly elapsedSeconds: number;
  /** Microseconds from the intended (open loop) or actual (closed loop) send to the end of a 2xx answer. */
  readonly latencyUs: hdr.Histogram;
  /** Answers that were not 2xx, by status ("503"), and streams that failed, by code ("stream ERR_…"). */
  readonly errors: ReadonlyMap<string, number>;
  /** The first error's status and body (or message), for a person to read. */
  readonly firstError: string | undefined;
  /** Open loop: requests due before the end that were never sent (the drain bound passed first). */
  readonly unsent: number;
  /** Requests sent but not answered when the drain bound passed (their fate on the server is unknown). */
  readonly unanswered: number;
}

/** Histograms of microseconds, growing as needed (a stalled server must not overflow them). */
export function newMicrosHistogram(): hdr.Histogram {
  return hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3, autoResize: true });
}

const errorBodyCharsMax = 500;

export function runLoad(options: LoadOptions): Promise<LoadResult> {
  return runOnSessions(options, '/v1/timers', (sessions, path) => new Load(options, sessions, path));
}

/**
 * Opens `connections` sessions to the fermata at options.url, runs the load `make` builds on
 * them against `route` (under the URL's path), and closes them.
 */
export async function runOnSessions(options: LoadOptions, route: string, make: (sessions: readonly http2.ClientHttp2Session[], path: string) => LoadLoop): Promise<LoadResult> {
  const base = new URL(options.url);
  const path = `${base.pathname.replace(/\/$/, '')}${route}`;
  const sessions = await Promise.all(Array.from({ length: options.connections }, () => connect(base)));
  const load = make(sessions, path);
  try {
    return await load.run();
  } finally {
    for (const session of sessions) if (!session.destroyed) session.destroy();
  }
}

/** Opens one session; rejects with the connect error (refused, TLS, …). */
function connect(base: URL): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(base.origin, { maxSessionMemory: 64 });
    session.once('connect', () => {
      session.removeListener('error', reject);
      // Later session errors end its streams, which count them.
      session.on('error', ignore);
      resolve(session);
    });
    session.once('error', reject);
  });
}

function ignore(): void {}

/**
 * The loop both load kinds share: when to send (closed loop while there is room; open loop at
 * due times), what an answer counts for, the drain after the end, and the result. A subclass
 * says whether a channel is open and sends one unit (a request, or a line of an add stream).
 */
export abstract class LoadLoop {
  protected readonly options: LoadOptions;
  readonly #start: number;
  readonly #measureStart: number;
  readonly #end: number;
  readonly #intervalMs: number;
  readonly #latencyUs = newMicrosHistogram();
  readonly #errors = new Map<string, number>();
  #firstError: string | undefined;
  /** Units sent (warm-up included). */
  protected sent = 0;
  #inFlight = 0;
  #okRequests = 0;
  #okTimers = 0;
  #spanOkRequests = 0;
  #spanOkTimers = 0;
  #lastAnswer = 0;
  #draining = false;
  #stopped = false;
  #wake: NodeJS.Timeout | undefined;
  #drainBound: NodeJS.Timeout | undefined;
  #settle: (() => void) | undefined;

  constructor(options: LoadOptions) {
    this.options = options;
    this.#start = performance.now();
    this.#measureStart = this.#start + options.warmupMs;
    this.#end = this.#measureStart + options.durationMs;
    this.#intervalMs = options.ratePerS === undefined ? 0 : 1000 / options.ratePerS;
  }

  /** Some channel can still carry a unit. */
  protected abstract canSend(): boolean;
  /** Sends unit `index` (0-based) now; `intended` is when it was due (open loop) or now (closed loop). Its end comes to succeeded() or failed(). */
  protected abstract send(intended: number, index: number): void;
  /** After the last answer or the drain bound, before the result is read. */
  protected finished(): void {}

  async run(): Promise<LoadResult> {
    const done = new Promise<void>((resolve) => (this.#settle = resolve));
    this.pump();
    const endTimer = setTimeout(() => this.#startDrain(), this.#end - performance.now());
    await done;
    clearTimeout(endTimer);
    clearTimeout(this.#wake);
    clearTimeout(this.#drainBound);
    this.finished();
    const opts = this.options;
    const due = opts.ratePerS === undefined ? this.sent : this.#dueCount();
    return {
      sent: this.sent,
      okRequests: this.#okRequests,
      okTimers: this.#okTimers,
      spanOkRequests: this.#spanOkRequests,
      spanOkTimers: this.#spanOkTimers,
      spanSeconds: opts.durationMs / 1000,
      elapsedSeconds: (Math.max(this.#lastAnswer, this.#start) - this.#start) / 1000,
      latencyUs: this.#latencyUs,
      errors: this.#errors,
      firstError: this.#firstError,
      unsent: due - this.sent,
      unanswered: this.#inFlight,
    };
  }

  /** Open loop: how many units fall due before the end, by the same test pump() applies. */
  #dueCount(): number {
    let count = Math.ceil((this.#end - this.#start) / this.#intervalMs);
    while (count > 0 && this.#start + (count - 1) * this.#intervalMs >= this.#end) count--;
    while (this.#start + count * this.#intervalMs < this.#end) count++;
    return count;
  }

  /** Sends what may go now: closed loop up to `concurrency` until the end; open loop every due unit while there is room. */
  protected pump(): void {
    const opts = this.options;
    while (!this.#stopped && this.#inFlight < opts.concurrency) {
      if (!this.canSend()) {
        // Every channel is gone: nothing more can be sent; what is in flight has already failed.
        this.#stopped = true;
        break;
      }
      const now = performance.now();
      let intended = now;
      if (opts.ratePerS === undefined) {
        if (now >= this.#end) break;
      } else {
        intended = this.#start + this.sent * this.#intervalMs;
        if (intended >= this.#end) break;
        if (intended > now) {
          clearTimeout(this.#wake);
          this.#wake = setTimeout(() => this.pump(), intended - now);
          break;
        }
      }
      const index = this.sent++;
      this.#inFlight++;
      this.send(intended, index);
    }
    this.#checkDone();
  }

  /** A unit of `rows` timers sent at (or due at) `intended` was acknowledged. */
  protected succeeded(intended: number, rows: number): void {
    this.#inFlight--;
    const now = performance.now();
    this.#lastAnswer = now;
    this.#okRequests++;
    this.#okTimers += rows;
    if (now >= this.#measureStart && now < this.#end) {
      this.#spanOkRequests++;
      this.#spanOkTimers += rows;
    }
    if (intended >= this.#measureStart) this.#latencyUs.recordValue(Math.max(1, Math.round((now - intended) * 1000)));
  }

  /** A unit failed: `key` counts it ("503", "stream ERR_…"), `why` is for a person to read. */
  protected failed(key: string, why: string): void {
    this.#inFlight--;
    this.#lastAnswer = performance.now();
    this.#errors.set(key, (this.#errors.get(key) ?? 0) + 1);
    this.#firstError ??= why;
  }

  /** The end: no more closed-loop sends; open loop still sends what fell due before it. Bounded by drainTimeoutMs. */
  #startDrain(): void {
    this.#draining = true;
    this.#drainBound = setTimeout(() => {
      this.#stopped = true;
      this.#settle?.();
    }, this.options.drainTimeoutMs);
    this.#checkDone();
  }

  #checkDone(): void {
    if (this.#inFlight > 0) return;
    if (this.#stopped) {
      this.#settle?.();
      return;
    }
    if (!this.#draining) return;
    const opts = this.options;
    const moreDue = opts.ratePerS !== undefined && this.#start + this.sent * this.#intervalMs < this.#end;
    if (moreDue && this.canSend()) return;
    this.#stopped = true;
    this.#settle?.();
  }
}

/** Requests, each a whole body, on many streams of a few sessions. */
class Load extends LoadLoop {
  readonly #sessions: readonly http2.ClientHttp2Session[];
  readonly #headers: readonly http2.OutgoingHttpHeaders[];

  constructor(options: LoadOptions, sessions: readonly http2.ClientHttp2Session[], path: string) {
    super(options);
    this.#sessions = sessions;
    this.#headers = options.bodies.map((body) => ({
      ':method': 'POST',
      ':path': path,
      'content-type': body.contentType,
      'content-length': body.bytes.length,
      ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
    }));
  }

  protected canSend(): boolean {
    return this.#session() !== undefined;
  }

  protected send(intended: number, index: number): void {
    const which = index % this.options.bodies.length;
    const body = this.options.bodies[which] as RequestBody;
    const session = this.#session() as http2.ClientHttp2Session;
    const stream = session.request(this.#headers[which] as http2.OutgoingHttpHeaders);
    let status = 0;
    let ended = false;
    let failure: string | undefined;
    let answer = '';
    stream.once('response', (headers) => {
      status = Number(headers[':status']);
    });
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      if ((status < 200 || status > 299) && answer.length < errorBodyCharsMax) answer += chunk;
    });
    stream.once('end', () => (ended = true));
    stream.once('error', (err: NodeJS.ErrnoException) => (failure = err.code ?? err.message));
    stream.once('close', () => {
      // An answer that ended is judged by its status; a stream that closed without one failed.
      const broken = ended && status > 0 ? undefined : (failure ?? `reset ${stream.rstCode ?? '?'}`);
      if (broken !== undefined) this.failed(`stream ${broken}`, broken);
      else if (status >= 200 && status <= 299) this.succeeded(intended, body.rows);
      else this.failed(String(status), `${status} ${answer.slice(0, errorBodyCharsMax)}`);
      this.pump();
    });
    stream.end(body.bytes);
  }

  /** The next session in turn that is still open, or undefined when none is. */
  #session(): http2.ClientHttp2Session | undefined {
    const count = this.#sessions.length;
    for (let step = 0; step < count; step++) {
      const session = this.#sessions[(this.sent + step) % count] as http2.ClientHttp2Session;
      if (!session.destroyed && !session.closed) return session;
    }
    return undefined;
  }
}
