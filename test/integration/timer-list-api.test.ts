// List, export, bulk cancel and purge as a client meets them: the real `fermata serve` on port 0,
// spoken to with curl over HTTP/1.1 and HTTP/2 with prior knowledge. Pages in (due, id) order
// with their cursors, filters, the Arrow export read back with apache-arrow, refusals naming
// their parameter, a bulk cancel and a purge with their counts, and after kill -9 and a restart
// the same timers cancelled. Every wait is bounded; the child is killed in the scratch's cleanup.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { tableFromIPC } from 'apache-arrow';
import { curl, type CurlAnswer, type CurlProtocol, curlRequest, curlWithoutHttp2, json, text } from '../helpers/curl.ts';
import { testScratch } from '../helpers/scratch.ts';
import { type Service, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { skipOrFail, toolOrSkip } from '../helpers/tools.ts';

const scratch = testScratch('fermata-timer-list');
const arrowType = 'application/vnd.apache.arrow.stream';
const target = 'https://a.example/hook';

interface Page {
  timers: Array<{ id: string; state: string; fire_at: string; queue: string; key: string | null }>;
  next_cursor: string | null;
}

function assertRefused(answer: CurlAnswer, field: string): void {
  assert.equal(answer.status, 400, text(answer));
  const { error } = json<{ error: { code: string; field?: string; message: string } }>(answer);
  assert.equal(error.code, 'REQUEST_INVALID');
  assert.equal(error.field, field, error.message);
}

describe('list, export, bulk cancel and purge over HTTP/1.1 and HTTP/2 with curl', { timeout: 120_000 }, () => {
  let service: Service;
  const dataDir = scratch.tempDir('data');
  const inADay = Date.now() + 86_400_000;
  /** Every timer added, as the list must give them: by fire time, then id. */
  let all: Array<{ id: string; fireAtMs: number; queue: string; key: string }> = [];

  before(async () => {
    service = await startService(dataDir, (child) => scratch.children.add(child));
    // 60 timers, three to a fire time (ties go by id), every third in "billing".
    const specs = Array.from({ length: 60 }, (_, i) => ({ fire_at: inADay + Math.floor(i / 3) * 1000, target, payload: `timer ${i}`, queue: i % 3 === 0 ? 'billing' : 'default', key: `order-${i}` }));
    const response = await fetch(`${service.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: specs.map((spec) => JSON.stringify(spec)).join('\n'), signal: AbortSignal.timeout(10_000) });
    assert.equal(response.status, 201);
    const { ids } = (await response.json()) as { ids: string[] };
    all = specs.map((spec, i) => ({ id: ids[i] as string, fireAtMs: spec.fire_at, queue: spec.queue, key: spec.key }));
    all.sort((a, b) => a.fireAtMs - b.fireAtMs || (a.id < b.id ? -1 : 1));
  });

  for (const protocol of ['http1.1', 'http2'] as const) {
    test(`${protocol}: pages, filters, the export and refusals`, async (t) => {
      if (toolOrSkip(t, 'curl') === undefined) return;
      if (protocol === 'http2' && !curl.http2) return skipOrFail(t, curlWithoutHttp2);
      const get = (query: string, headers: Readonly<Record<string, string>> = {}): Promise<CurlAnswer> => curlRequest({ protocol, url: `${service.url}/v1/timers?${query}`, headers });

      const seen: string[] = [];
      for (let query = 'limit=7'; ; ) {
        const answer = await get(query);
        assert.equal(answer.status, 200, text(answer));
        const page = json<Page>(answer);
        seen.push(...page.timers.map((timer) => timer.id));
        if (page.next_cursor === null) break;
        query = `limit=7&cursor=${page.next_cursor}`;
      }
      assert.deepEqual(seen, all.map((timer) => timer.id), 'every timer once, by fire time then id');

      const billing = json<Page>(await get('queue=billing&limit=1000'));
      assert.deepEqual(billing.timers.map((timer) => timer.id), all.filter((timer) => timer.queue === 'billing').map((timer) => timer.id));
      assert.equal(billing.next_cursor, null);
      const prefixed = json<Page>(await get('key_prefix=order-1&state=pending'));
      assert.deepEqual(prefixed.timers.map((timer) => timer.key).sort(), all.filter((timer) => timer.key.startsWith('order-1')).map((timer) => timer.key).sort());
      const one = json<Page>(await get('key=order-42'));
      assert.deepEqual(one.timers.map((timer) => timer.key), ['order-42']);
      const window = json<Page>(await get(`due_after=${new Date(inADay + 5000).toISOString()}&due_before=${inADay + 8000}`));
      assert.deepEqual(window.timers.map((timer) => timer.id), all.filter((timer) => timer.fireAtMs >= inADay + 5000 && timer.fireAtMs < inADay + 8000).map((timer) => timer.id));
      const none = json<Page>(await get('state=delivered'));
      assert.deepEqual(none, { timers: [], next_cursor: null });

      const exported = await get('queue=default', { accept: arrowType });
      assert.equal(exported.status, 200);
      const table = tableFromIPC(exported.body);
      const defaults = all.filter((timer) => timer.queue === 'default');
      assert.equal(table.numRows, defaults.length);
      assert.deepEqual(table.getChild('id')?.toArray(), defaults.map((timer) => timer.id));
      assert.deepEqual(table.schema.fields.map((field) => field.name).slice(0, 3), ['id', 'state', 'fire_at']);
      const first = table.get(0)?.toJSON() as { fire_at: number; payload: Uint8Array; queue: string; key: string; state: string };
      assert.equal(first.fire_at, defaults[0]?.fireAtMs);
      assert.equal(first.queue, 'default');
      assert.equal(first.state, 'pending');
      assert.equal(first.key, defaults[0]?.key);
      assert.match(Buffer.from(first.payload).toString(), /^timer \d+$/);
      const empty = tableFromIPC((await get('queue=nobody', { accept: arrowType })).body);
      assert.equal(empty.numRows, 0, 'no match: the schema alone');

      assertRefused(await get('limit=1001'), 'limit');
      assertRefused(await get('limit=0'), 'limit');
      assertRefused(await get('cursor=not-a-cursor'), 'cursor');
      assertRefused(await get('state=sleeping'), 'state');
      assertRefused(await get('due_after=1796083200'), 'due_after');
      assertRefused(await get('due_before=tomorrow'), 'due_before');
      assertRefused(await get('due_befor=2030-01-01T00:00:00Z'), 'due_befor');
      assertRefused(await get('limit=5&limit=7'), 'limit');
      const plus = await get('due_after=2030-01-01T00:00:00+01:00');
      assertRefused(plus, 'due_after');
      assert.match(json<{ error: { message: string } }>(plus).error.message, /%2B/);
    });
  }

  test('bulk cancel and purge: refusals, counts, and the same timers cancelled after kill -9 and a restart', async (t) => {
    if (toolOrSkip(t, 'curl') === undefined) return;
    const protocols: CurlProtocol[] = curl.http2 ? ['http1.1', 'http2'] : ['http1.1'];
    const post = (protocol: CurlProtocol, body: string): Promise<CurlAnswer> => curlRequest({ protocol, method: 'POST', url: `${service.url}/v1/timers/cancel`, body });
    for (const protocol of protocols) {
      assertRefused(await post(protocol, '{}'), 'queue');
      assertRefused(await post(protocol, '{"ids": []}'), 'ids');
      assertRefused(await post(protocol, '{"ids": ["a"], "queue": "billing"}'), 'ids');
      assertRefused(await post(protocol, '{"state": "pending"}'), 'state');
      assertRefused(await post(protocol, '{"queue": "billing", "due_before": "soon"}'), 'due_before');
      const purgeUnknown = await curlRequest({ protocol, method: 'DELETE', url: `${service.url}/v1/queues/nobody/timers` });
      assert.equal(purgeUnknown.status, 404);
      // The path is the bulk cancel's, not a timer id: another method is 405 naming POST.
      for (const method of ['GET', 'PATCH', 'DELETE']) {
        const refused = await curlRequest({ protocol, method, url: `${service.url}/v1/timers/cancel` });
        assert.deepEqual([refused.status, refused.headers.allow, json<{ error: { code: string } }>(refused).error.code], [405, 'POST', 'METHOD_NOT_ALLOWED'], `${method} over ${protocol}`);
      }
    }
    const [h1, h2] = [protocols[0] as CurlProtocol, protocols[protocols.length - 1] as CurlProtocol];
    const early = all.filter((timer) => timer.queue === 'billing' && timer.fireAtMs < inADay + 10_000);
    const cancelled = await post(h1, JSON.stringify({ queue: 'billing', due_before: inADay + 10_000 }));
    assert.equal(cancelled.status, 200, text(cancelled));
    assert.deepEqual(json(cancelled), { cancelled: early.length, in_flight: 0 });
    const someDefault = all.find((timer) => timer.queue === 'default')?.id as string;
    const byIds = await post(h2, JSON.stringify({ ids: [someDefault, someDefault, '0000000000000000000000zz'] }));
    assert.deepEqual(json(byIds), { cancelled: 1, in_flight: 0 }, 'named twice, cancelled once; an unknown id is skipped');
    const purged = await curlRequest({ protocol: h2, method: 'DELETE', url: `${service.url}/v1/queues/billing/timers` });
    assert.equal(purged.status, 200);
    const billing = all.filter((timer) => timer.queue === 'billing');
    assert.deepEqual(json(purged), { cancelled: billing.length - early.length, in_flight: 0 });
    const listCancelled = async (): Promise<string[]> => json<Page>(await curlRequest({ protocol: h1, url: `${service.url}/v1/timers?state=cancelled&limit=1000` })).timers.map((timer) => timer.id);
    const before = await listCancelled();
    assert.equal(before.length, billing.length + 1);
    const counted = json<{ bulk_cancels: number; cancelled_in_bulk: number }>(await curlRequest({ protocol: h1, url: `${service.url}/v1/stats` }));
    assert.deepEqual([counted.bulk_cancels, counted.cancelled_in_bulk], [3, before.length], 'three bulk cancels took every cancelled timer');
    const metrics = text(await curlRequest({ protocol: h1, url: `${service.url}/metrics` }));
    assert.match(metrics, /^fermata_bulk_cancels_total 3$/m);
    assert.match(metrics, new RegExp(`^fermata_bulk_cancelled_timers_total ${before.length}$`, 'm'));

    service.child.kill('SIGKILL');
    await withTimeout(service.exited, 10_000, 'fermata to die');
    service = await startService(dataDir, (child) => scratch.children.add(child));
    assert.deepEqual(await listCancelled(), before, 'the cancels were durable, and replay cancels the same timers');
    const stats = json<{ pending: number }>(await curlRequest({ protocol: h1, url: `${service.url}/v1/stats` }));
    assert.equal(stats.pending, all.length - before.length);
  });
});
