// POST /v1/timers/stream against the real `fermata serve` in a child process: one long HTTP/2
// request whose NDJSON lines are single adds, each answered on the open stream as soon as it is
// durable (a line is written only after the answer to the one before it arrived, so nothing
// here passes unless answers come while the request is still open); bad lines are answered
// with their error and the stream goes on; what was answered survives kill -9; curl (HTTP/1.1
// and HTTP/2) gets the same answers, and so does a Python client written with the h2 library
// (test/fixtures/h2_add_stream.py, one line at a time); SIGTERM ends an open stream with a
// last line and exits 0.
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { ingestLimits } from '../../engine/limits.ts';
import { curl, curlRequest, text } from '../helpers/curl.ts';
import { skipOrFail, toolOrSkip } from '../helpers/tools.ts';
import { ensureVenv, run } from '../helpers/python-venv.ts';
import { testScratch } from '../helpers/scratch.ts';
import { type Service, startService as startTrackedService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';

const answerTimeoutMs = 10_000;
const ndjson = 'application/x-ndjson';

const scratch = testScratch('fermata-stream');

function dataDir(): string {
  return scratch.tempDir('data');
}

function startService(dir: string): Promise<Service> {
  return startTrackedService(dir, (child) => scratch.children.add(child));
}

interface StreamAnswer {
  readonly line?: number;
  readonly status: number;
  readonly id?: string;
  readonly fire_at?: string;
  readonly duplicate?: boolean;
  readonly retry_after_s?: number;
  readonly error?: { readonly code: string; readonly message: string; readonly field?: string };
}

/** One open POST /v1/timers/stream over HTTP/2: lines go out as written, answers are read one at a time. */
class AddStream {
  readonly #session: http2.ClientHttp2Session;
  readonly #request: http2.ClientHttp2Stream;
  readonly #answers: StreamAnswer[] = [];
  readonly #waiting: ((answer: StreamAnswer | undefined) => void)[] = [];
  #tail = '';
  #ended = false;
  readonly status: Promise<number>;
  readonly contentType: Promise<string | undefined>;

  constructor(url: string) {
    this.#session = http2.connect(url);
    this.#session.on('error', () => undefined);
    this.#request = this.#session.request({ ':method': 'POST', ':path': '/v1/timers/stream', 'content-type': ndjson });
    const response = new Promise<http2.IncomingHttpHeaders>((resolve) => this.#request.once('response', resolve));
    this.status = response.then((headers) => Number(headers[':status']));
    this.contentType = response.then((headers) => headers['content-type']);
    this.#request.setEncoding('utf8');
    this.#request.on('data', (chunk: string) => {
      const text = this.#tail + chunk;
      const lines = text.split('\n');
      this.#tail = lines.pop() ?? '';
      for (const line of lines) this.#deliver(JSON.parse(line) as StreamAnswer);
    });
    this.#request.on('close', () => {
      this.#ended = true;
      for (const waiter of this.#waiting.splice(0)) waiter(undefined);
    });
    this.#request.on('error', () => undefined);
  }

  #deliver(answer: StreamAnswer): void {
    const waiter = this.#waiting.shift();
    if (waiter === undefined) this.#answers.push(answer);
    else waiter(answer);
  }

  write(text: string | Uint8Array): void {
    this.#request.write(text);
  }

  /** The next answer line; undefined once the answer has ended. */
  next(): Promise<StreamAnswer | undefined> {
    const ready = this.#answers.shift();
    if (ready !== undefined || this.#ended) return Promise.resolve(ready);
    return withTimeout(new Promise<StreamAnswer | undefined>((resolve) => this.#waiting.push(resolve)), answerTimeoutMs, 'the next answer line');
  }

  /** Writes one line and waits for its answer. */
  async add(line: string): Promise<StreamAnswer> {
    this.write(`${line}\n`);
    const answer = await this.next();
    assert.ok(answer !== undefined, `an answer to ${line}`);
    return answer;
  }

  end(): void {
    this.#request.end();
  }

  close(): void {
    this.#session.destroy();
  }
}

const timer = (fields: Record<string, unknown>): string => JSON.stringify({ delay_ms: 3_600_000, target: 'https://a.example/hook', ...fields });

async function getTimer(url: string, id: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${url}/v1/timers/${id}`, { signal: AbortSignal.timeout(answerTimeoutMs) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function kill9(service: Service): Promise<void> {
  service.child.kill('SIGKILL');
  await withTimeout(service.exited, 10_000, 'fermata to die');
}

test('each line is answered on the open stream once durable, bad lines alone, and answered adds survive kill -9', async () => {
  const dir = dataDir();
  let service = await startService(dir);
  const stream = new AddStream(service.url);
  try {
    const first = await stream.add(timer({ key: 'order-1', payload: 'one' }));
    assert.equal(await stream.status, 200);
    assert.equal(await stream.contentType, ndjson);
    assert.equal(first.line, 1);
    assert.equal(first.status, 201);
    assert.equal(first.duplicate, false);
    assert.ok(typeof first.id === 'string' && typeof first.fire_at === 'string');

    // A blank line is skipped and answered by nobody: the next answer is line 3's.
    stream.write('\n');
    const badTarget = await stream.add(timer({ target: 'ftp://a.example/x' }));
    assert.deepEqual({ line: badTarget.line, status: badTarget.status, code: badTarget.error?.code, field: badTarget.error?.field }, { line: 3, status: 400, code: 'BATCH_INVALID', field: 'target' });
    assert.doesNotMatch(badTarget.error?.message ?? '', /row 0/, 'a line is not a row of some batch');
    const notJson = await stream.add('{"delay_ms": 5,');
    assert.deepEqual({ line: notJson.line, status: notJson.status, code: notJson.error?.code }, { line: 4, status: 400, code: 'BATCH_INVALID' });
    // Bytes that are not UTF-8, ended by the newline add('') writes.
    stream.write(Uint8Array.of(0x7b, 0xff, 0xfe, 0x7d));
    const notUtf8 = await stream.add('');
    assert.deepEqual({ line: notUtf8.line, status: notUtf8.status, code: notUtf8.error?.code }, { line: 5, status: 400, code: 'BATCH_INVALID' });
    const unknownField = await stream.add(timer({ colour: 'red' }));
    assert.deepEqual({ line: unknownField.line, status: unknownField.status, field: unknownField.error?.field }, { line: 6, status: 400, field: 'colour' });

    const again = await stream.add(timer({ key: 'order-1', payload: 'other' }));
    assert.deepEqual({ line: again.line, status: again.status, id: again.id, fire_at: again.fire_at, duplicate: again.duplicate }, { line: 7, status: 200, id: first.id, fire_at: first.fire_at, duplicate: true });

    // Many lines in one write: one answer each, in input order.
    stream.write(Array.from({ length: 50 }, (_, i) => `${timer({ key: `many-${i}` })}\n`).join(''));
    const many: StreamAnswer[] = [];
    for (let i = 0; i < 50; i++) many.push((await stream.next()) as StreamAnswer);
    assert.deepEqual(many.map((answer) => answer.line), Array.from({ length: 50 }, (_, i) => 8 + i));
    assert.ok(many.every((answer) => answer.status === 201));
    assert.equal(new Set(many.map((answer) => answer.id)).size, 50);

    // A last line without its newline is a line all the same.
    stream.write(timer({ key: 'last' }));
    stream.end();
    const last = await stream.next();
    assert.deepEqual({ line: last?.line, status: last?.status }, { line: 58, status: 201 });
    assert.equal(await stream.next(), undefined, 'the answer ends after the last line');

    await kill9(service);
    service = await startService(dir);
    for (const answer of [first, ...many, last as StreamAnswer]) {
      const found = await getTimer(service.url, answer.id as string);
      assert.equal(found.status, 200, `timer ${answer.id} of line ${answer.line} survived kill -9`);
      assert.equal(found.body.state, 'pending');
    }
    const stats = (await (await fetch(`${service.url}/v1/stats`)).json()) as { pending: number };
    assert.equal(stats.pending, 52, 'the 52 answered adds, and nothing of the refused lines');
  } finally {
    stream.close();
    await kill9(service);
  }
});

test('a line over the limit for one timer is refused alone; the stream reads on', async () => {
  const service = await startService(dataDir());
  const stream = new AddStream(service.url);
  try {
    const huge = timer({ payload: 'x'.repeat(ingestLimits.jsonBodyBytesMax) });
    const tooLarge = await stream.add(huge);
    assert.deepEqual({ line: tooLarge.line, status: tooLarge.status, code: tooLarge.error?.code }, { line: 1, status: 413, code: 'BODY_TOO_LARGE' });
    const next = await stream.add(timer({}));
    assert.deepEqual({ line: next.line, status: next.status }, { line: 2, status: 201 });
  } finally {
    stream.close();
    await kill9(service);
  }
});

test('only NDJSON is taken: another Content-Type is answered 415 with the error shape', async () => {
  const service = await startService(dataDir());
  try {
    const response = await fetch(`${service.url}/v1/timers/stream`, { method: 'POST', headers: { 'content-type': 'application/vnd.apache.arrow.stream' }, body: 'x', signal: AbortSignal.timeout(answerTimeoutMs) });
    assert.equal(response.status, 415);
    const body = (await response.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'UNSUPPORTED_MEDIA_TYPE');
  } finally {
    await kill9(service);
  }
});

test('curl, over HTTP/1.1 and HTTP/2, gets one answer a line', async (t) => {
  if (toolOrSkip(t, 'curl') === undefined) return;
  const service = await startService(dataDir());
  try {
    const body = `${timer({ key: 'curl-1' })}\n${timer({ target: 'nope' })}\n${timer({ key: 'curl-1' })}\n`;
    for (const protocol of curl.http2 ? (['http1.1', 'http2'] as const) : (['http1.1'] as const)) {
      const answer = await curlRequest({ protocol, url: `${service.url}/v1/timers/stream`, body, headers: { 'content-type': ndjson } });
      assert.equal(answer.status, 200, text(answer));
      const answers = text(answer).trimEnd().split('\n').map((line) => JSON.parse(line) as StreamAnswer);
      assert.deepEqual(answers.map((line) => [line.line, line.status]), protocol === 'http1.1' ? [[1, 201], [2, 400], [3, 200]] : [[1, 200], [2, 400], [3, 200]], protocol);
    }
  } finally {
    await kill9(service);
  }
});

test('SIGTERM ends an open stream: what was read is answered, a last line says the rest was not read, exit 0', async () => {
  const service = await startService(dataDir());
  const stream = new AddStream(service.url);
  try {
    const first = await stream.add(timer({}));
    assert.equal(first.status, 201);
    service.child.kill('SIGTERM');
    const last = await stream.next();
    assert.ok(last !== undefined, 'a last line');
    assert.equal(last.line, undefined);
    assert.equal(last.status, 503);
    assert.equal(last.error?.code, 'WAL_CLOSED');
    assert.match(last.error?.message ?? '', /after line 1/);
    assert.equal(await stream.next(), undefined, 'then the answer ends');
    await withTimeout(service.exited, 15_000, 'fermata to exit');
    assert.equal(service.child.exitCode, 0, service.output());
  } finally {
    stream.close();
    if (service.child.exitCode === null) await kill9(service);
  }
});

const h2Client = fileURLToPath(new URL('../fixtures/h2_add_stream.py', import.meta.url));
/** Its own venv (git-ignored): the shared one holds pyarrow, and asking it for h2 would rebuild it. */
const h2VenvDir = fileURLToPath(new URL('../../node_modules/.cache/fermata-pyvenv-h2', import.meta.url));

test('a Python client written with h2 adds timers one line at a time, each answered before it sends the next', { timeout: 600_000 }, async (t) => {
  const venv = await ensureVenv(['h2'], { dir: h2VenvDir });
  if ('skip' in venv) return skipOrFail(t, venv.skip);
  const service = await startService(dataDir());
  try {
    const { port } = service;
    const result = await run(venv.python, [h2Client, '127.0.0.1', String(port), '5', 'py'], 30_000, 'h2_add_stream.py');
    assert.equal(result.code, 0, result.stderr);
    const { status, answers } = JSON.parse(result.stdout) as { status: number; answers: StreamAnswer[] };
    assert.equal(status, 200);
    assert.deepEqual(answers.map((answer) => [answer.line, answer.status, answer.duplicate]), [1, 2, 3, 4, 5].map((line) => [line, 201, false]));
    for (const answer of answers) {
      const found = await getTimer(service.url, answer.id as string);
      assert.equal(found.status, 200);
      assert.equal(found.body.key, `py-${(answer.line as number) - 1}`);
    }
  } finally {
    await kill9(service);
  }
});
