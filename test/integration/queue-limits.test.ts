// A queue's pending cap and retention as a user meets them over curl (issue 47): the real
// `fermata serve --clock manual` on loopback, delivering to a loopback sink. A queue PUT with
// max_pending 3 takes three adds and answers the fourth 429 QUEUE_FULL with Retry-After (HTTP/1.1
// and HTTP/2); a cancel frees a place. A queue PUT with retention_ms 1000 keeps a delivered timer
// a second of the clock: then GET answers 404 and its key is free. One service for the file;
// every wait is bounded.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { curl, type CurlAnswer, curlRequest, curlWithoutHttp2, json } from '../helpers/curl.ts';
import { testScratch } from '../helpers/scratch.ts';
import { type Service, startService } from '../helpers/service.ts';
import { type Sink, startH2Sink } from '../helpers/sinks.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { toolPath } from '../helpers/tools.ts';

/** How long a change the clock made may take to show on this shared machine. */
const settledWithinMs = 10_000;

const scratch = testScratch('fermata-queue-limits');
let sink: Sink | undefined;

after(() => sink?.close());

async function curlJson(method: string, url: string, body?: unknown, http2 = false): Promise<CurlAnswer & { readonly json: Record<string, unknown> }> {
  const answer = await curlRequest({ protocol: http2 ? 'http2' : 'http1.1', method, url, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { ...answer, json: json(answer) };
}

/** Polls GET /v1/timers/{id} until its status is `status` (and, for 200, its state `state`). */
async function until(url: string, id: unknown, status: number, state?: string): Promise<void> {
  await withTimeout(
    (async () => {
      for (;;) {
        const timer = await curlJson('GET', `${url}/v1/timers/${String(id)}`);
        if (timer.status === status && (state === undefined || timer.json.state === state)) return;
        await sleep(20);
      }
    })(),
    settledWithinMs,
    `timer ${String(id)} to answer ${status}${state === undefined ? '' : ` ${state}`}`,
  );
}

const hasCurl = toolPath('curl') !== undefined && curl.http2;

describe('per-queue limits over curl', { skip: hasCurl ? false : `needs curl with HTTP/2 (${curlWithoutHttp2})` }, () => {
  let service: Service;

  before(async () => {
    sink = await startH2Sink();
    service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child), { args: ['--clock', 'manual'] });
  });

  test('max_pending 3: the fourth add is 429 QUEUE_FULL with Retry-After, nothing added; a cancel frees a place', async () => {
    const put = await curlJson('PUT', `${service.url}/v1/queues/capped`, { max_pending: 3 });
    assert.equal(put.status, 200);
    assert.deepEqual([put.json.max_pending, put.json.retention_ms, put.json.dead_retention_ms], [3, null, null]);
    const timer = { delay_ms: 3_600_000, target: `${sink?.url}/capped`, queue: 'capped' };
    const ids: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      const added = await curlJson('POST', `${service.url}/v1/timers`, timer, i === 1);
      assert.equal(added.status, 201);
      ids.push(added.json.id);
    }
    for (const http2 of [false, true]) {
      const full = await curlJson('POST', `${service.url}/v1/timers`, timer, http2);
      assert.equal(full.status, 429);
      assert.equal(full.headers['retry-after'], '1');
      assert.deepEqual(full.json.error, { ...(full.json.error as object), code: 'QUEUE_FULL', queue: 'capped', pending: 3 });
    }
    // A batch with one row for the full queue is refused whole: its other row is not added either.
    const ndjson = [{ ...timer, queue: 'elsewhere' }, timer].map((row) => JSON.stringify(row)).join('\n');
    const batch = await curlRequest({ method: 'POST', url: `${service.url}/v1/timers`, headers: { 'content-type': 'application/x-ndjson' }, body: ndjson });
    assert.equal(batch.status, 429);
    assert.equal(json<{ error: { code: string } }>(batch).error.code, 'QUEUE_FULL');
    const listed = await curlJson('GET', `${service.url}/v1/timers?queue=elsewhere`);
    assert.deepEqual(listed.json.timers, []);

    assert.equal((await curlJson('DELETE', `${service.url}/v1/timers/${String(ids[0])}`)).status, 200);
    assert.equal((await curlJson('POST', `${service.url}/v1/timers`, timer)).status, 201, 'the cancel freed a place');
    assert.equal((await curlJson('POST', `${service.url}/v1/timers`, timer)).status, 429);
  });

  test('retention_ms 1000: a delivered timer answers for a second of the clock, then 404, and its key is free', async () => {
    assert.equal((await curlJson('PUT', `${service.url}/v1/queues/brief`, { retention_ms: 1_000 })).status, 200);
    const timer = { delay_ms: 1_000, target: `${sink?.url}/brief`, queue: 'brief', key: 'brief-1' };
    const added = await curlJson('POST', `${service.url}/v1/timers`, timer);
    assert.equal(added.status, 201);
    assert.equal((await curlJson('POST', `${service.url}/v1/clock`, { advance_ms: 1_000 })).status, 200);
    await until(service.url, added.json.id, 200, 'delivered');
    assert.equal((await curlJson('POST', `${service.url}/v1/timers`, timer)).json.id, added.json.id, 'within its retention the key answers with it');
    assert.equal((await curlJson('POST', `${service.url}/v1/clock`, { advance_ms: 1_000 })).status, 200);
    await until(service.url, added.json.id, 404);
    const again = await curlJson('POST', `${service.url}/v1/timers`, timer);
    assert.equal(again.status, 201);
    assert.notEqual(again.json.id, added.json.id, 'the key was released with it');
  });
});
