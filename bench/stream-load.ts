// The load generator's stream mode: single adds as lines of long `POST /v1/timers/stream`
// requests, one request open on each of `connections` HTTP/2 sessions, `concurrency` adds in
// flight over all of them. Each answer line settles the oldest line in flight on its stream
// (the service answers in input order). The same loops, spans and figures as load-generator.ts,
// counted per timer: closed loop (a line goes out when an answer comes back) or open loop (line
// i due at start + i / rate, latency from then, so a stalled server shows as latency). Runs on
// the caller's main thread; every wait is bounded.
import http2 from 'node:http2';
import { performance } from 'node:perf_hooks';
import { type LoadOptions, type LoadResult, newMicrosHistogram } from './load-generator.ts';

/** One open add stream: its request, and the intended send times of its lines in flight, oldest first. */
interface AddStream {
  readonly session: http2.ClientHttp2Session;
  readonly request: http2.ClientHttp2Stream;
  readonly intended: number[];
  head: number;
  tail: string;
  open: boolean;
}

const errorLineCharsMax = 500;

/** Runs the load; `options.bodies` are one-timer JSON bodies, each sent as one line. */
export async function runStreamLoad(options: LoadOptions): Promise<LoadResult> {
  const base = new URL(options.url);
  const path = `${base.pathname.replace(/\/$/, '')}/v1/timers/stream`;
  const sessions = await Promise.all(Array.from({ length: options.connections }, () => connect(base)));
  const load = new StreamLoad(options, sessions, path);
  try {
    return await load.run();
  } finally {
    for (const session of sessions) if (!session.destroyed) session.destroy();
  }
}

function connect(base: URL): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(base.origin, { maxSessionMemory: 64 });
    session.once('connect', () => {
      session.removeListener('error', reject);
      session.on('error', () => undefined);
      resolve(session);
    });
    session.once('error', reject);
  });
}

/** The status of an answer line (`{"line":…,"status":201,…}`), without parsing the whole of it. */
function statusOf(line: string): number {
  const at = line.indexOf('"status":');
  return at < 0 ? 0 : Number.parseInt(line.slice(at + 9, at + 12), 10);
}

class StreamLoad {
  readonly #options: LoadOptions;
  readonly #streams: AddStream[];
  readonly #lines: readonly Buffer[];
  readonly #start: number;
  readonly #measureStart: number;
  readonly #end: number;
  readonly #intervalMs: number;
  readonly #latencyUs = newMicrosHistogram();
  readonly #errors = new Map<string, number>();
  #firstError: string | undefined;
  #sent = 0;
  #inFlight = 0;
  #ok = 0;
  #spanOk = 0;
  #lastAnswer = 0;
  #draining = false;
  #stopped = false;
  #wake: NodeJS.Timeout | undefined;
  #drainBound: NodeJS.Timeout | undefined;
  #settle: (() => void) | undefined;

  constructor(options: LoadOptions, sessions: readonly http2.ClientHttp2Session[], path: string) {
    this.#options = options;
    this.#lines = options.bodies.map((body) => Buffer.concat([body.bytes, Buffer.from('\n')]));
    const headers = {
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/x-ndjson',
      ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
    };
    this.#streams = sessions.map((session) => this.#open(session, headers));
    this.#start = performance.now();
    this.#measureStart = this.#start + options.warmupMs;
    this.#end = this.#measureStart + options.durationMs;
    this.#intervalMs = options.ratePerS === undefined ? 0 : 1000 / options.ratePerS;
  }

  #open(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders): AddStream {
    const request = session.request(headers);
    const stream: AddStream = { session, request, intended: [], head: 0, tail: '', open: true };
    let status = 0;
    let refusal = '';
    request.once('response', (answer) => (status = Number(answer[':status'])));
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      if (status !== 200) {
        if (refusal.length < errorLineCharsMax) refusal += chunk;
        return;
      }
      const text = stream.tail + chunk;
      let start = 0;
      for (let end = text.indexOf('\n', start); end >= 0; end = text.indexOf('\n', start)) {
        this.#answer(stream, text.slice(start, end));
        start = end + 1;
      }
      stream.tail = text.slice(start);
    });
    request.on('error', () => undefined);
    request.once('close', () => {
      stream.open = false;
      // Lines still in flight were not answered: the stream was refused, reset or ended early.
      const why = status !== 0 && status !== 200 ? `${status} ${refusal.slice(0, errorLineCharsMax)}` : `stream closed ${request.rstCode ?? '?'}`;
      const key = status !== 0 && status !== 200 ? String(status) : 'stream closed';
      while (stream.head < stream.intended.length) {
        stream.head++;
        this.#fail(key, why);
      }
      this.#pump();
    });
    return stream;
  }

  async run(): Promise<LoadResult> {
    const done = new Promise<void>((resolve) => (this.#settle = resolve));
    this.#pump();
    const endTimer = setTimeout(() => this.#startDrain(), this.#end - performance.now());
    await done;
    clearTimeout(endTimer);
    clearTimeout(this.#wake);
    clearTimeout(this.#drainBound);
    for (const stream of this.#streams) if (stream.open) stream.request.end();
    const opts = this.#options;
    const due = opts.ratePerS === undefined ? this.#sent : this.#dueCount();
    return {
      sent: this.#sent,
      okRequests: this.#ok,
      okTimers: this.#ok,
      spanOkRequests: this.#spanOk,
      spanOkTimers: this.#spanOk,
      spanSeconds: opts.durationMs / 1000,
      elapsedSeconds: (Math.max(this.#lastAnswer, this.#start) - this.#start) / 1000,
      latencyUs: this.#latencyUs,
      errors: this.#errors,
      firstError: this.#firstError,
      unsent: due - this.#sent,
      unanswered: this.#inFlight,
    };
  }

  #dueCount(): number {
    let count = Math.ceil((this.#end - this.#start) / this.#intervalMs);
    while (count > 0 && this.#start + (count - 1) * this.#intervalMs >= this.#end) count--;
    while (this.#start + count * this.#intervalMs < this.#end) count++;
    return count;
  }

  #pump(): void {
    const opts = this.#options;
    while (!this.#stopped && this.#inFlight < opts.concurrency) {
      const stream = this.#stream();
      if (stream === undefined) {
        this.#stopped = true;
        break;
      }
      const now = performance.now();
      if (opts.ratePerS === undefined) {
        if (now >= this.#end) break;
        this.#send(stream, now);
        continue;
      }
      const intended = this.#start + this.#sent * this.#intervalMs;
      if (intended >= this.#end) break;
      if (intended > now) {
        clearTimeout(this.#wake);
        this.#wake = setTimeout(() => this.#pump(), intended - now);
        break;
      }
      this.#send(stream, intended);
    }
    this.#checkDone();
  }

  #send(stream: AddStream, intended: number): void {
    const line = this.#lines[this.#sent % this.#lines.length] as Buffer;
    this.#sent++;
    this.#inFlight++;
    stream.intended.push(intended);
    stream.request.write(line);
  }

  #answer(stream: AddStream, line: string): void {
    if (stream.head >= stream.intended.length) return;
    const intended = stream.intended[stream.head++] as number;
    if (stream.head === stream.intended.length) {
      stream.intended.length = 0;
      stream.head = 0;
    } else if (stream.head > 4096) {
      stream.intended.splice(0, stream.head);
      stream.head = 0;
    }
    const status = statusOf(line);
    if (status < 200 || status > 299) {
      this.#fail(String(status), line.slice(0, errorLineCharsMax));
    } else {
      this.#inFlight--;
      const now = performance.now();
      this.#lastAnswer = now;
      this.#ok++;
      if (now >= this.#measureStart && now < this.#end) this.#spanOk++;
      if (intended >= this.#measureStart) this.#latencyUs.recordValue(Math.max(1, Math.round((now - intended) * 1000)));
    }
    this.#pump();
  }

  #fail(key: string, why: string): void {
    this.#inFlight--;
    this.#lastAnswer = performance.now();
    this.#errors.set(key, (this.#errors.get(key) ?? 0) + 1);
    this.#firstError ??= why;
  }

  /** The open stream with the fewest lines in flight (the next in turn among equals), or undefined when none is open. */
  #stream(): AddStream | undefined {
    let best: AddStream | undefined;
    const count = this.#streams.length;
    for (let step = 0; step < count; step++) {
      const stream = this.#streams[(this.#sent + step) % count] as AddStream;
      if (!stream.open || stream.session.destroyed) continue;
      if (best === undefined || stream.intended.length - stream.head < best.intended.length - best.head) best = stream;
    }
    return best;
  }

  #startDrain(): void {
    this.#draining = true;
    this.#drainBound = setTimeout(() => {
      this.#stopped = true;
      this.#settle?.();
    }, this.#options.drainTimeoutMs);
    this.#checkDone();
  }

  #checkDone(): void {
    if (this.#inFlight > 0) return;
    if (this.#stopped) {
      this.#settle?.();
      return;
    }
    if (!this.#draining) return;
    const opts = this.#options;
    const moreDue = opts.ratePerS !== undefined && this.#start + this.#sent * this.#intervalMs < this.#end;
    if (moreDue && this.#stream() !== undefined) return;
    this.#stopped = true;
    this.#settle?.();
  }
}
