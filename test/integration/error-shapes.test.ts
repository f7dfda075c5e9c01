// Issue 39's rough edges, as a newcomer meets them, against the real `fermata serve` (a child
// process on port 0, with Flight): a fire_at in epoch seconds is refused wherever a number can
// carry it (JSON, NDJSON, stream lines, an Arrow Int64 column over HTTP and Flight DoPut) while
// an Arrow Timestamp in seconds and a past time in ms are taken; every error, fastify's own
// included (unknown route, unknown method, a URL that does not decode, a body that is not
// JSON), has the one JSON shape; a single timer's errors name `field` only; NDJSON sent as
// application/json, and NDJSON whose newlines `curl -d @file` stripped (real curl, a real file),
// get a hint. Every wait is bounded; the child is killed at the end.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { status } from '@grpc/grpc-js';
import { type Data, Int64, makeData, makeVector, Table, tableFromIPC, tableToIPC, Timestamp, TimeUnit, Utf8, vectorFromArray } from 'apache-arrow';
import { flightDataOf, FlightTestClient, timersDescriptor } from '../../ingest/flight/flight-client.ts';
import { curlRequest, text } from '../helpers/curl.ts';
import { toolOrSkip } from '../helpers/tools.ts';
import { testScratch } from '../helpers/scratch.ts';
import { flightUrl, type Service, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';

const scratch = testScratch('fermata-error-shapes');
const requestTimeoutMs = 10_000;
const target = 'http://127.0.0.1:9/hook';
const ndjsonType = 'application/x-ndjson';
const arrowType = 'application/vnd.apache.arrow.stream';
/** 2026-12-01T00:00:00Z in epoch seconds: what a client that means seconds sends. */
const seconds = 1_796_083_200;
const secondsHint = /fire_at -?\d+ looks like epoch seconds: .*multiply seconds by 1000/;

interface ErrorBody {
  readonly error: { readonly code: string; readonly message: string; readonly field?: string; readonly column?: string; readonly row?: number; readonly line?: number };
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

async function request(base: string, method: string, path: string, body?: string | Uint8Array, contentType?: string): Promise<Answer> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: contentType === undefined ? {} : { 'content-type': contentType },
    ...(body === undefined ? {} : { body }),
    signal: AbortSignal.timeout(requestTimeoutMs),
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

/** The answer's error, checked to be the one shape: `error` with code and message, nothing else beside it. */
function errorOf(answer: Answer, status: number): ErrorBody['error'] {
  assert.equal(answer.status, status, answer.text);
  assert.match(answer.headers.get('content-type') ?? '', /^application\/json/);
  const body = JSON.parse(answer.text) as ErrorBody;
  assert.deepEqual(Object.keys(body), ['error'], answer.text);
  assert.equal(typeof body.error.code, 'string');
  assert.equal(typeof body.error.message, 'string');
  return body.error;
}

function arrowOf(fireAt: Data<Int64 | Timestamp>): Uint8Array {
  const targets = vectorFromArray(Array.from({ length: fireAt.length }, () => target), new Utf8());
  return tableToIPC(new Table({ fire_at: makeVector(fireAt), target: targets }), 'stream');
}

const int64s = (values: readonly number[]): Data<Int64> => makeData({ type: new Int64(), length: values.length, data: BigInt64Array.from(values, (value) => BigInt(value)) });

/** curl POSTing `file` with `dataFlag` (`-d` strips its newlines, `--data-binary` keeps them), answered as `request` answers. */
async function curlFile(url: string, contentType: string, dataFlag: '-d' | '--data-binary', file: string): Promise<Answer> {
  const answer = await curlRequest({ url, headers: { 'content-type': contentType }, flags: [dataFlag, `@${file}`], timeoutMs: requestTimeoutMs });
  return { status: answer.status, headers: new Headers(answer.headers), text: text(answer) };
}

describe('errors a newcomer meets in the first hour', { timeout: 120_000 }, () => {
  let service: Service;
  let base: string;
  const inADay = Date.now() + 86_400_000;

  before(async () => {
    service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child), { args: ['--flight', '127.0.0.1:0'] });
    base = service.url;
  });

  test('a JSON fire_at in epoch seconds, 0 or negative: 400 naming fire_at, saying it looks like seconds', async () => {
    for (const fireAt of [seconds, 0, -5, 999_999_999_999]) {
      const error = errorOf(await request(base, 'POST', '/v1/timers', JSON.stringify({ fire_at: fireAt, target }), 'application/json'), 400);
      assert.equal(error.code, 'BATCH_INVALID');
      assert.equal(error.field, 'fire_at');
      assert.match(error.message, secondsHint);
      assert.deepEqual(Object.keys(error).sort(), ['code', 'field', 'message'], 'a single timer names the field, not a row or column');
    }
    const error = errorOf(await request(base, 'POST', '/v1/timers', JSON.stringify({ fire_at: seconds, target }), 'application/json'), 400);
    assert.match(error.message, new RegExp(`${seconds} s is ${seconds * 1000} ms`));
  });

  test('epoch ms are taken: a past time means now, 10^12 itself is the first accepted', async () => {
    const pastMs = Date.now() - 3_600_000;
    for (const fireAt of [pastMs, 1_000_000_000_000, inADay]) {
      const answer = await request(base, 'POST', '/v1/timers', JSON.stringify({ fire_at: fireAt, target }), 'application/json');
      assert.equal(answer.status, 201, answer.text);
      assert.equal((JSON.parse(answer.text) as { fire_at: string }).fire_at, new Date(fireAt).toISOString());
    }
  });

  test('an NDJSON batch with a seconds fire_at: refused whole, naming fire_at, the row and the line', async () => {
    const body = [JSON.stringify({ fire_at: inADay, target }), '', JSON.stringify({ fire_at: seconds, target })].join('\n');
    const error = errorOf(await request(base, 'POST', '/v1/timers', body, ndjsonType), 400);
    assert.deepEqual({ code: error.code, field: error.field, row: error.row, line: error.line }, { code: 'BATCH_INVALID', field: 'fire_at', row: 1, line: 3 });
    assert.match(error.message, secondsHint);
  });

  test('a stream line with a seconds fire_at is answered 400 naming fire_at; the lines around it are added', async () => {
    const body = [JSON.stringify({ fire_at: inADay, target }), JSON.stringify({ fire_at: seconds, target }), JSON.stringify({ delay_ms: 60_000, target })].join('\n') + '\n';
    const answer = await request(base, 'POST', '/v1/timers/stream', body, ndjsonType);
    assert.equal(answer.status, 200, answer.text);
    const lines = answer.text.trim().split('\n').map((line) => JSON.parse(line) as { line: number; status: number; error?: ErrorBody['error'] });
    assert.deepEqual(lines.map((line) => [line.line, line.status]), [[1, 201], [2, 400], [3, 201]]);
    assert.equal(lines[1]?.error?.field, 'fire_at');
    assert.match(lines[1]?.error?.message ?? '', secondsHint);
  });

  test('an Arrow Int64 fire_at in seconds: 400 naming the column and row; a Timestamp in seconds is taken as seconds', async () => {
    const error = errorOf(await request(base, 'POST', '/v1/timers', arrowOf(int64s([inADay, seconds])), arrowType), 400);
    assert.deepEqual({ code: error.code, column: error.column, row: error.row }, { code: 'BATCH_INVALID', column: 'fire_at', row: 1 });
    assert.match(error.message, secondsHint);
    assert.match(error.message, /in row 1$/);

    const inADaySeconds = Math.floor(inADay / 1000);
    const timestamps = makeData({ type: new Timestamp(TimeUnit.SECOND, 'UTC'), length: 1, data: BigInt64Array.of(BigInt(inADaySeconds)) });
    const added = await fetch(`${base}/v1/timers`, { method: 'POST', headers: { 'content-type': arrowType, accept: arrowType }, body: arrowOf(timestamps), signal: AbortSignal.timeout(requestTimeoutMs) });
    assert.equal(added.status, 201);
    const id = String(tableFromIPC(new Uint8Array(await added.arrayBuffer())).getChild('id')?.get(0));
    const view = await request(base, 'GET', `/v1/timers/${id}`);
    assert.equal(view.status, 200, view.text);
    assert.equal((JSON.parse(view.text) as { fire_at: string }).fire_at, new Date(inADaySeconds * 1000).toISOString());
  });

  test('Flight DoPut of an Int64 fire_at in seconds: INVALID_ARGUMENT with the same message, column and row', async () => {
    const client = new FlightTestClient(await flightUrl(service));
    try {
      const outcome = await withTimeout(client.doPut(flightDataOf(timersDescriptor(), [arrowOf(int64s([inADay, inADay, seconds]))])), requestTimeoutMs, 'DoPut');
      assert.equal(outcome.error?.code, status.INVALID_ARGUMENT, String(outcome.error));
      assert.match(outcome.error?.details ?? '', /^BATCH_INVALID: fire_at \d+ looks like epoch seconds: .*multiply seconds by 1000.* in row 2 \(record batch 0 of the stream\)$/);
      assert.deepEqual(outcome.error?.metadata.get('fermata-column'), ['fire_at']);
      assert.deepEqual(outcome.error?.metadata.get('fermata-row'), ['2']);
      assert.equal(outcome.results.length, 0);
    } finally {
      client.close();
    }
  });

  test('a path no route serves: 404 ROUTE_NOT_FOUND in the error shape', async () => {
    for (const [method, path] of [['GET', '/v2/timers'], ['POST', '/nowhere'], ['GET', '/v1/timers/a/b'], ['DELETE', '/healthz/']] as const) {
      const error = errorOf(await request(base, method, path), 404);
      assert.equal(error.code, 'ROUTE_NOT_FOUND', `${method} ${path}`);
      assert.deepEqual(Object.keys(error).sort(), ['code', 'message']);
    }
  });

  test('a method a path is not served by: 405 METHOD_NOT_ALLOWED with Allow listing the methods it is', async () => {
    for (const [method, path, allow] of [
      ['PUT', '/v1/timers', 'GET, HEAD, POST'],
      ['PUT', '/v1/timers/abc', 'DELETE, GET, HEAD, PATCH'],
      ['POST', '/healthz', 'GET, HEAD'],
      ['DELETE', '/v1/queues', 'GET, HEAD'],
      ['GET', '/v1/dead/abc/retry', 'POST'],
      ['POST', '/v1/timers/', 'DELETE, GET, HEAD, PATCH'],
      // A fixed path is its route's alone, never a timer id.
      ['GET', '/v1/timers/cancel', 'POST'],
      ['PATCH', '/v1/timers/stream', 'POST'],
      ['PUT', '/v1/timers/cancel', 'POST'],
    ] as const) {
      const answer = await request(base, method, path);
      const error = errorOf(answer, 405);
      assert.equal(error.code, 'METHOD_NOT_ALLOWED', `${method} ${path}`);
      assert.equal(answer.headers.get('allow'), allow, `${method} ${path}`);
      assert.match(error.message, new RegExp(`does not serve ${method}`));
    }
  });

  test("fastify's own refusals have the shape too: a URL that does not decode, an unknown type, JSON that does not parse", async () => {
    assert.equal(errorOf(await request(base, 'GET', '/v1/timers/%zz'), 400).code, 'REQUEST_INVALID');
    assert.equal(errorOf(await request(base, 'POST', '/v1/timers', 'hello', 'text/plain'), 415).code, 'UNSUPPORTED_MEDIA_TYPE');
    const broken = errorOf(await request(base, 'POST', '/v1/timers', '{"target":', 'application/json'), 400);
    assert.equal(broken.code, 'BODY_INVALID');
    assert.match(broken.message, /^the body is not valid JSON \(.+\)$/);
    assert.doesNotMatch(broken.message, /ndjson|data-binary/);
    // Malformed HTTP/1.1, refused by node's parser before fastify routes it.
    const raw = await withTimeout(
      new Promise<string>((resolve, reject) => {
        const socket = net.connect(service.port, '127.0.0.1', () => socket.write('this is not HTTP\r\n\r\n'));
        let text = '';
        socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        socket.on('close', () => resolve(text));
        socket.on('error', reject);
      }),
      requestTimeoutMs,
      'the answer to malformed HTTP/1.1',
    );
    assert.match(raw, /^HTTP\/1\.1 400 Bad Request\r\n/);
    const malformed = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as ErrorBody;
    assert.equal(malformed.error.code, 'REQUEST_INVALID');
    assert.match(malformed.error.message, /^not a well-formed HTTP\/1\.1 request \(HPE_/);
  });

  test('a single timer names the field alone; a batch row names field, row and line', async () => {
    const bad = errorOf(await request(base, 'POST', '/v1/timers', JSON.stringify({ fire_at: inADay, target: 'ftp://example.com/x' }), 'application/json'), 400);
    assert.deepEqual({ code: bad.code, field: bad.field, keys: Object.keys(bad).sort() }, { code: 'BATCH_INVALID', field: 'target', keys: ['code', 'field', 'message'] });
    assert.doesNotMatch(bad.message, /row/);
    // The SSRF guard's refusal of a literal address named column and row 0 like a batch row.
    const refused = errorOf(await request(base, 'POST', '/v1/timers', JSON.stringify({ fire_at: inADay, target: 'http://10.1.2.3/x' }), 'application/json'), 400);
    assert.deepEqual({ code: refused.code, field: refused.field, keys: Object.keys(refused).sort() }, { code: 'TARGET_REFUSED', field: 'target', keys: ['code', 'field', 'message'] });
    assert.doesNotMatch(refused.message, /row/);
    const body = [JSON.stringify({ fire_at: inADay, target }), JSON.stringify({ fire_at: inADay, target: 'http://10.1.2.3/x' })].join('\n');
    const inBatch = errorOf(await request(base, 'POST', '/v1/timers', body, ndjsonType), 400);
    assert.deepEqual({ code: inBatch.code, field: inBatch.field, row: inBatch.row, line: inBatch.line, column: inBatch.column }, { code: 'TARGET_REFUSED', field: 'target', row: 1, line: 2, column: undefined });
  });

  test('NDJSON sent as application/json: 400 BODY_INVALID with a hint to send application/x-ndjson', async () => {
    const body = [JSON.stringify({ fire_at: inADay, target }), JSON.stringify({ fire_at: inADay, target })].join('\n') + '\n';
    const error = errorOf(await request(base, 'POST', '/v1/timers', body, 'application/json'), 400);
    assert.equal(error.code, 'BODY_INVALID');
    assert.match(error.message, /looks like NDJSON.*Content-Type: application\/x-ndjson/);
  });

  test('curl -d @file strips an NDJSON file\'s newlines: the answer says to use --data-binary, which then works', async (t) => {
    if (toolOrSkip(t, 'curl') === undefined) return;
    const file = join(scratch.tempDir('curl'), 'timers.ndjson');
    writeFileSync(file, [JSON.stringify({ fire_at: inADay, target, payload: 'a' }), JSON.stringify({ fire_at: inADay, target, payload: 'b' })].join('\n') + '\n');
    const url = `${base}/v1/timers`;

    const error = errorOf(await curlFile(url, ndjsonType, '-d', file), 400);
    assert.deepEqual({ code: error.code, row: error.row, line: error.line }, { code: 'BATCH_INVALID', row: 0, line: 1 });
    assert.match(error.message, /curl -d @file.*--data-binary @file/);

    const jsonError = errorOf(await curlFile(url, 'application/json', '-d', file), 400);
    assert.equal(jsonError.code, 'BODY_INVALID');
    assert.match(jsonError.message, /--data-binary @file.*application\/x-ndjson/);

    const streamed = await curlFile(`${base}/v1/timers/stream`, ndjsonType, '-d', file);
    assert.equal(streamed.status, 200, streamed.text);
    const [answer] = streamed.text.trim().split('\n').map((line) => JSON.parse(line) as { line: number; status: number; error: ErrorBody['error'] });
    assert.deepEqual([answer?.line, answer?.status], [1, 400]);
    assert.match(answer?.error.message ?? '', /--data-binary @file/);

    const kept = await curlFile(url, ndjsonType, '--data-binary', file);
    assert.equal(kept.status, 201, kept.text);
    assert.equal((JSON.parse(kept.text) as { accepted: number }).accepted, 2);
  });
});
