// A TimerStream is one POST /v1/timers/stream (routes/timer-stream.ts registers the route):
// single adds on one long request. The body is NDJSON, one timer a line, read as it arrives; the answer is NDJSON too, one line per timer line, in the order of
// the input, each written once that timer is durable. A client keeps one such request open and
// has many adds in flight on it, each answered on its own: the per-add cost of a request (its
// headers, its stream, fastify's routing) is paid once per stream instead of once per timer.
//
//   request  {"delay_ms":60000,"target":"https://a.example/hook","key":"k1"}\n   …
//   answer   {"line":1,"status":201,"id":"…","fire_at":"…","revision":1,"duplicate":false}\n   …
//            {"line":2,"status":200,"id":"…","fire_at":"…","revision":1,"duplicate":true,"state":"pending","differs":[]}\n
//            {"line":2,"status":400,"error":{"code":"BATCH_INVALID","message":"…","field":"target"}}\n
//            {"line":3,"status":503,"retry_after_s":1,"error":{"code":"CAPACITY_FULL",…}}\n
//
// Each line is its own add, with the answer a one-timer `POST /v1/timers` of that JSON object
// would get (`status` 201, 200 for a known key, or the error's status and body): a bad line is
// answered with its error and the lines after it go on. `line` is 1-based in the body; blank
// lines are skipped and get no answer. A line that gets no answer (the stream broke, or the
// service stopped reading it: then a last line without `line` says so) was not added.
//
// Lines read in one event-loop turn, from every stream and every one-timer JSON request, share
// one WAL record through the AdmitCoalescer. A stream holds at most streamLimits.linesInFlightMax
// lines (and linesBytesInFlightMax bytes) waiting for their answer; past that, or while the
// answer is not being read, it stops reading its body (HTTP/2 flow control then holds the
// client back). When the service stops, open streams stop reading, answer what they read and end.
// Owned by the main thread (the server's event loop).
import type { PassThrough, Readable } from 'node:stream';
import type { AdmitCoalescer, AdmitWaiter } from '../../engine/admit-coalescer.ts';
import type { TimerSpec } from '../../engine/batch/timer-batch.ts';
import type { DuplicateAnswer } from '../../engine/engine.ts';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import { ingestLimits } from '../../engine/limits.ts';
import type { Clock } from '../../engine/types.ts';
import { differsAsAsked, gaveDelayMs } from '../duplicate-answers.ts';
import { inJsonTerms, specFromJsonTimer } from './body/json-batch.ts';
import { type TraceHeaders, withTrace } from '../../engine/trace-context.ts';
import { ndjsonLineProblem } from './body/json-hints.ts';
import { errorAnswer, httpErrorCodes, HttpProblem } from './error-map.ts';
import { isoOf } from './iso-time.ts';
import { mediaTypes } from './media-types.ts';
import { streamLimits } from './route-limits.ts';

const newline = 0x0a;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** One line read: its answer once known. */
interface Answer {
  text: string | undefined;
  readonly bytes: number;
}

/** A line that went to the coalescer: hears its admit's end there, and tells its stream. */
class LineAdd implements Answer, AdmitWaiter {
  text: string | undefined = undefined;
  readonly bytes: number;
  readonly #line: number;
  readonly #fireAtMs: number;
  readonly #gaveDelay: boolean;
  readonly #stream: TimerStream;

  constructor(stream: TimerStream, line: number, bytes: number, fireAtMs: number, gaveDelay: boolean) {
    this.#stream = stream;
    this.#line = line;
    this.bytes = bytes;
    this.#fireAtMs = fireAtMs;
    this.#gaveDelay = gaveDelay;
  }

  admitted(id: string, duplicate: boolean, original: DuplicateAnswer | undefined): void {
    if (!duplicate || original === undefined) {
      this.text = `{"line":${this.#line},"status":201,"id":"${id}","fire_at":"${isoOf(this.#fireAtMs)}","revision":1,"duplicate":false}\n`;
    } else {
      // A known key answers with the original timer's fire time, its state and what differs from it.
      const fireAtMs = original.fireAtMs;
      const differs = JSON.stringify(differsAsAsked(original, this.#gaveDelay));
      this.text = `{"line":${this.#line},"status":200,"id":"${id}","fire_at":"${isoOf(fireAtMs)}","revision":${original.revision},"duplicate":true,"state":"${original.state}","differs":${differs}}\n`;
    }
    this.#stream.answered();
  }

  refused(err: unknown): void {
    this.text = this.#stream.errorLine(this.#line, inJsonTerms(err, undefined));
    this.#stream.answered();
  }
}

/** What a stream needs of the coalescer. */
export type LineAdmitter = Pick<AdmitCoalescer, 'admitOneTo'>;

/**
 * One open stream: splits its body into lines, admits each, and writes the answers in input
 * order as they become known.
 */
export class TimerStream {
  readonly #body: Readable;
  readonly #out: PassThrough;
  readonly #coalescer: LineAdmitter;
  /** The clock a line's `delay_ms` counts from (the engine's). */
  readonly #clock: Clock;
  readonly #onEnd: () => void;
  readonly #logUnexpected: (err: unknown) => void;
  /** Answers not yet written, oldest first from #head. */
  #answers: Answer[] = [];
  #head = 0;
  #bytesInFlight = 0;
  /** Parts of the line being read (its newline not seen yet), and their length. */
  #partial: Buffer[] = [];
  #partialBytes = 0;
  /** The line being read is over the limit: its bytes are dropped up to its newline. */
  #skipping = false;
  /** Lines seen so far (the number of the one being read, less one). */
  #line = 0;
  /** No more lines will be read: the body ended, or the service is stopping. */
  #readingDone = false;
  /** Why reading stopped early, as a last answer line (undefined: the body ended). */
  #stopLine: string | undefined;
  #closed = false;
  /** A flush of the answers known so far is queued (a microtask). */
  #flushQueued = false;

  /** The request's trace headers, given to each line's timer that names no traceparent of its own. */
  readonly #trace: TraceHeaders | undefined;

  /** `onEnd` runs once the stream is done (answered in full, or the client went away); `logUnexpected` hears errors answered as INTERNAL (bugs). */
  constructor(body: Readable, out: PassThrough, coalescer: LineAdmitter, clock: Clock, onEnd: () => void, logUnexpected: (err: unknown) => void, trace?: TraceHeaders) {
    this.#trace = trace;
    this.#body = body;
    this.#out = out;
    this.#coalescer = coalescer;
    this.#clock = clock;
    this.#onEnd = onEnd;
    this.#logUnexpected = logUnexpected;
    body.on('data', (chunk: Buffer | string) => this.#read(typeof chunk === 'string' ? Buffer.from(chunk) : chunk));
    body.once('end', () => {
      if (this.#readingDone) return;
      // A last line without its newline is a line all the same.
      if (this.#partialBytes > 0 || this.#skipping) this.#takeLine(Buffer.alloc(0));
      this.#readingDone = true;
      this.#flush();
    });
    body.once('error', () => this.#close());
    out.on('drain', () => this.#resumeIfRoom());
    out.once('close', () => this.#close());
  }

  /** Reading stopped before the body ended (the service is stopping): the client may still be sending. */
  get stoppedEarly(): boolean {
    return this.#stopLine !== undefined;
  }

  /** The answer line to an add that failed: its error in the shape and status of error-map.ts. */
  errorLine(line: number | undefined, err: unknown): string {
    const answer = errorAnswer(err, mediaTypes.json);
    if (answer.unexpected) this.#logUnexpected(err);
    const retry = answer.retryAfterSeconds === undefined ? '' : `,"retry_after_s":${answer.retryAfterSeconds}`;
    const place = line === undefined ? '' : `"line":${line},`;
    return `{${place}"status":${answer.status}${retry},"error":${JSON.stringify(answer.body.error)}}\n`;
  }

  /** The service is stopping: read no more, answer what was read, end. */
  stopReading(): void {
    if (this.#readingDone || this.#closed) return;
    this.#readingDone = true;
    this.#body.pause();
    this.#body.removeAllListeners('data');
    const after = this.#line === 0 ? 'no line was read' : `lines after line ${this.#line} were not read`;
    this.#stopLine = this.errorLine(undefined, new FermataError(errorCodes.walClosed, `the service is stopping: ${after}; send them again`));
    this.#flush();
  }

  #read(chunk: Buffer): void {
    let start = 0;
    for (let end = chunk.indexOf(newline); end >= 0 && !this.#readingDone; end = chunk.indexOf(newline, start)) {
      this.#takeLine(chunk.subarray(start, end));
      start = end + 1;
    }
    if (start < chunk.length && !this.#readingDone) this.#keepPartial(chunk.subarray(start));
    this.#pauseIfFull();
  }

  #keepPartial(part: Buffer): void {
    if (this.#skipping) return;
    if (this.#partialBytes + part.length > ingestLimits.jsonBodyBytesMax) {
      this.#skipping = true;
      this.#partial = [];
      this.#partialBytes = 0;
      return;
    }
    // The chunk's memory is the stream's to reuse once this callback returns.
    this.#partial.push(Buffer.from(part));
    this.#partialBytes += part.length;
  }

  /** `tail` ends the line being read (before its newline). */
  #takeLine(tail: Buffer): void {
    const line = ++this.#line;
    // Over the limit: already dropped in part (skipping), or only now with its last part.
    if (this.#skipping || this.#partialBytes + tail.length > ingestLimits.jsonBodyBytesMax) {
      this.#skipping = false;
      this.#partial = [];
      this.#partialBytes = 0;
      const tooLarge = new HttpProblem(httpErrorCodes.bodyTooLarge, `line ${line} is longer than ${ingestLimits.jsonBodyBytesMax} bytes, the limit for one timer`);
      this.#push({ text: this.errorLine(line, tooLarge), bytes: 0 });
      return;
    }
    let bytes = tail;
    if (this.#partialBytes > 0) {
      this.#partial.push(tail);
      bytes = Buffer.concat(this.#partial, this.#partialBytes + tail.length);
      this.#partial = [];
      this.#partialBytes = 0;
    }
    let text: string;
    try {
      text = utf8.decode(bytes);
    } catch {
      this.#push({ text: this.errorLine(line, new FermataError(errorCodes.batchInvalid, `line ${line} is not valid UTF-8`, { field: '' })), bytes: 0 });
      return;
    }
    text = text.trim();
    if (text === '') return;
    let spec: TimerSpec;
    let value: unknown;
    try {
      try {
        value = JSON.parse(text);
      } catch (err) {
        throw new FermataError(errorCodes.batchInvalid, `line ${line} is ${ndjsonLineProblem(text, err)}`, { field: '' });
      }
      spec = withTrace(specFromJsonTimer(value, this.#clock.now()), this.#trace);
    } catch (err) {
      this.#push({ text: this.errorLine(line, err), bytes: 0 });
      return;
    }
    const add = new LineAdd(this, line, bytes.length, spec.fireAtMs, gaveDelayMs(value));
    this.#push(add);
    this.#coalescer.admitOneTo(spec, add);
  }

  #push(answer: Answer): void {
    this.#answers.push(answer);
    this.#bytesInFlight += answer.bytes;
    if (answer.text !== undefined) this.answered();
  }

  /**
   * A line's answer became known. The answers known by the end of this callback (a record's
   * admits end together) go out in one write: a write a line was 4% of the main thread, and a
   * DATA frame a line for the client to read.
   */
  answered(): void {
    if (this.#flushQueued) return;
    this.#flushQueued = true;
    queueMicrotask(() => {
      this.#flushQueued = false;
      this.#flush();
    });
  }

  /** Writes every answer known in input order; ends the answer once reading is done and every line is answered. */
  #flush(): void {
    if (this.#closed) return;
    const answers = this.#answers;
    let head = this.#head;
    let out = '';
    while (head < answers.length) {
      const answer = answers[head] as Answer;
      if (answer.text === undefined) break;
      out += answer.text;
      this.#bytesInFlight -= answer.bytes;
      head++;
    }
    if (head === answers.length) {
      this.#answers = [];
      this.#head = 0;
    } else if (head > 1024 && head * 2 > answers.length) {
      this.#answers = answers.slice(head);
      this.#head = 0;
    } else {
      this.#head = head;
    }
    if (out !== '') this.#out.write(out);
    if (this.#readingDone && this.#answers.length === 0) {
      if (this.#stopLine !== undefined) this.#out.write(this.#stopLine);
      this.#out.end();
      this.#finish();
      return;
    }
    this.#resumeIfRoom();
  }

  #full(): boolean {
    return this.#answers.length - this.#head >= streamLimits.linesInFlightMax || this.#bytesInFlight >= streamLimits.linesBytesInFlightMax || this.#out.writableNeedDrain;
  }

  #pauseIfFull(): void {
    if (!this.#readingDone && this.#full()) this.#body.pause();
  }

  #resumeIfRoom(): void {
    if (!this.#readingDone && this.#body.isPaused() && !this.#full()) this.#body.resume();
  }

  /** The client went away (its stream reset, the connection closed): nothing more is read or written. */
  #close(): void {
    if (this.#closed) return;
    this.#readingDone = true;
    this.#body.removeAllListeners('data');
    this.#body.resume();
    this.#out.destroy();
    this.#finish();
  }

  #finish(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#onEnd();
  }
}
