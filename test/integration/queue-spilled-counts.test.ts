// A queue's pending and its max_pending cap count its timers spilled to disk, over curl against
// the real `fermata serve` on loopback: far-future timers of a capped queue and of others go to
// disk (the far horizon, once adds go quiet); GET /v1/queues shows each queue's pending with them,
// an add past the cap is 429 QUEUE_FULL naming that count, a cancel of a spilled timer frees a
// place, and after a restart the counts are the same. One service (started twice) for the file;
// every wait is bounded.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { curl, curlRequest, json } from '../helpers/curl.ts';
import { testScratch } from '../helpers/scratch.ts';
import { type Service, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';

const scratch = testScratch('fermata-queue-spilled-counts');
const day = 24 * 3_600_000;
const target = 'https://hooks.example/far';

interface Answer {
  readonly status: number;
  readonly json: Record<string, unknown>;
}

async function call(method: string, url: string, body?: unknown): Promise<Answer> {
  const answer = await curlRequest({ method, url, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: answer.status, json: json(answer) };
}

/** Each named queue's pending in GET /v1/queues. */
async function pendingOf(url: string, names: readonly string[]): Promise<number[]> {
  const listed = (await call('GET', `${url}/v1/queues`)).json.queues as Array<{ name: string; pending: number }>;
  return names.map((name) => listed.find((queue) => queue.name === name)?.pending ?? -1);
}

async function spilled(url: string): Promise<number> {
  return (await call('GET', `${url}/v1/stats`)).json.spilled as number;
}

describe('a queue\'s pending and max_pending with its timers spilled to disk', { skip: curl.present ? false : 'needs curl' }, () => {
  const dataDir = scratch.tempDir('data');
  let service: Service;

  before(async () => {
    service = await startService(dataDir, (child) => scratch.children.add(child));
  });

  after(async () => {
    service.child.kill('SIGTERM');
    await service.exited;
  });

  test('spilled timers count in pending and against the cap: QUEUE_FULL at the cap, a cancel frees a place, a restart keeps the counts', async () => {
    assert.equal((await call('PUT', `${service.url}/v1/queues/capped`, { max_pending: 5 })).status, 200);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const added = await call('POST', `${service.url}/v1/timers`, { delay_ms: 10 * day + i * 1000, target, queue: 'capped' });
      assert.equal(added.status, 201);
      ids.push(added.json.id as string);
    }
    for (let i = 0; i < 3; i++) assert.equal((await call('POST', `${service.url}/v1/timers`, { delay_ms: 12 * day + i * 1000, target, queue: 'other' })).status, 201);
    // Enough bytes due far ahead for the loader to find a spill worth it (memoryLimits.farSpillBytesMin).
    const ballast = Array.from({ length: 5 }, (_, i) => JSON.stringify({ delay_ms: 11 * day + i * 1000, target, queue: 'ballast', payload: 'b'.repeat(900_000) })).join('\n');
    assert.equal((await curlRequest({ method: 'POST', url: `${service.url}/v1/timers`, headers: { 'content-type': 'application/x-ndjson' }, body: ballast })).status, 201);

    // Quiet: the loader moves every one of them, due past the far horizon, to disk.
    await withTimeout(
      (async () => {
        while ((await spilled(service.url)) !== 13) await sleep(200);
      })(),
      20_000,
      'the far-future timers to spill',
    );
    assert.deepEqual(await pendingOf(service.url, ['capped', 'other']), [5, 3], 'pending counts the spilled timers');

    const full = await call('POST', `${service.url}/v1/timers`, { delay_ms: 10 * day, target, queue: 'capped' });
    assert.equal(full.status, 429);
    assert.deepEqual(full.json.error, { ...(full.json.error as object), code: 'QUEUE_FULL', queue: 'capped', pending: 5 });

    // A cancel of a spilled timer frees its place once acknowledged.
    assert.equal((await call('DELETE', `${service.url}/v1/timers/${ids[0] as string}`)).status, 200);
    assert.deepEqual(await pendingOf(service.url, ['capped', 'other']), [4, 3]);
    assert.equal((await call('POST', `${service.url}/v1/timers`, { delay_ms: 10 * day, target, queue: 'capped' })).status, 201, 'the cancel freed a place');
    assert.equal((await call('POST', `${service.url}/v1/timers`, { delay_ms: 10 * day, target, queue: 'capped' })).status, 429);

    service.child.kill('SIGTERM');
    await service.exited;
    service = await startService(dataDir, (child) => scratch.children.add(child));
    assert.deepEqual(await pendingOf(service.url, ['capped', 'other']), [5, 3], 'the same counts after a restart');
    assert.equal((await call('POST', `${service.url}/v1/timers`, { delay_ms: 10 * day, target, queue: 'capped' })).status, 429);
  });
});
