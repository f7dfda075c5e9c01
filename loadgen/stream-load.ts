// The load generator's stream mode: single adds as lines of long `POST /v1/timers/stream`
// requests, one request open on each of `connections` HTTP/2 sessions, `concurrency` adds in
// flight over all of them. Each answer line settles the oldest line in flight on its stream
// (the service answers in input order). The loop, spans and figures are load-generator.ts's
// (LoadLoop), counted per timer: a "request" is a line. Runs on the caller's main thread;
// every wait is bounded.
import http2 from 'node:http2';
import { type LoadOptions, LoadLoop, type LoadResult, runOnSessions } from './load-generator.ts';

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
export function runStreamLoad(options: LoadOptions): Promise<LoadResult> {
  return runOnSessions(options, '/v1/timers/stream', (sessions, path) => new StreamLoad(options, sessions, path));
}

/** The status of an answer line (`{"line":…,"status":201,…}`), without parsing the whole of it. */
function statusOf(line: string): number {
  const at = line.indexOf('"status":');
  return at < 0 ? 0 : Number.parseInt(line.slice(at + 9, at + 12), 10);
}

class StreamLoad extends LoadLoop {
  readonly #streams: AddStream[];
  readonly #lines: readonly Buffer[];

  constructor(options: LoadOptions, sessions: readonly http2.ClientHttp2Session[], path: string) {
    super(options);
    this.#lines = options.bodies.map((body) => Buffer.concat([body.bytes, Buffer.from('\n')]));
    const headers = {
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/x-ndjson',
      ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
    };
    this.#streams = sessions.map((session) => this.#open(session, headers));
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
      const refused = status !== 0 && status !== 200;
      const key = refused ? String(status) : 'stream closed';
      const why = refused ? `${status} ${refusal.slice(0, errorLineCharsMax)}` : `stream closed ${request.rstCode ?? '?'}`;
      while (stream.head < stream.intended.length) {
        stream.head++;
        this.failed(key, why);
      }
      this.pump();
    });
    return stream;
  }

  protected canSend(): boolean {
    return this.#stream() !== undefined;
  }

  protected send(intended: number, index: number): void {
    const stream = this.#stream() as AddStream;
    stream.intended.push(intended);
    stream.request.write(this.#lines[index % this.#lines.length] as Buffer);
  }

  protected override finished(): void {
    for (const stream of this.#streams) if (stream.open) stream.request.end();
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
    if (status >= 200 && status <= 299) this.succeeded(intended, 1);
    else this.failed(String(status), line.slice(0, errorLineCharsMax));
    this.pump();
  }

  /** The open stream with the fewest lines in flight (the next in turn among equals), or undefined when none is open. */
  #stream(): AddStream | undefined {
    let best: AddStream | undefined;
    const count = this.#streams.length;
    for (let step = 0; step < count; step++) {
      const stream = this.#streams[(this.sent + step) % count] as AddStream;
      if (!stream.open || stream.session.destroyed) continue;
      if (best === undefined || stream.intended.length - stream.head < best.intended.length - best.head) best = stream;
    }
    return best;
  }
}
