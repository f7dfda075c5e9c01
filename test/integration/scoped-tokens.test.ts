// Issue 47 over a real `fermata serve` and curl, one service for the file: scoped tokens (each
// scope's routes, 401 and the 403s naming the scope or the queue, a queue-limited token's adds,
// lists and single timers), a queue's own signing secrets checked by a receiver beside the
// service's, the audit trail's lines and counter, and reload (POST /v1/admin/reload and SIGHUP:
// the old token refused, the new one taken, a new signing secret signing the next delivery, a
// new free-space minimum turning /readyz red, a broken config file changing nothing and saying
// why).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { verifyWebhook } from '../../dispatch/signing.ts';
import { type CurlAnswer, curlRequest, json, text } from '../helpers/curl.ts';
import { testScratch } from '../helpers/scratch.ts';
import { type Service, startService } from '../helpers/service.ts';
import { type Sink, type SinkRequest, startH1Sink } from '../helpers/sinks.ts';

const scratch = testScratch('fermata-scoped');
const secret = (): string => `whsec_${randomBytes(32).toString('base64')}`;
const [serviceSecret, paymentsSecret, rotatedSecret] = [secret(), secret(), secret()];
const tokens = { admin: 'admin-token-0000000000', reader: 'reader-token-000000000', writer: 'writer-token-000000000', payments: 'payments-token-0000000', reader2: 'reader2-token-00000000' };

let service: Service;
let sink: Sink;
let configFile: string;

function writeConfig(reader: string, signing: string, diskFreeBytesMin = 0): void {
  writeFileSync(
    configFile,
    JSON.stringify({
      tokens: [
        tokens.admin,
        { name: 'reader', token: reader, scopes: ['read'] },
        { name: 'writer', token: tokens.writer, scopes: ['write'] },
        { name: 'payments', token: tokens.payments, scopes: ['read', 'write'], queues: ['payments'] },
      ],
      dispatch: { threads: 1, signing_secrets: [signing], queue_signing_secrets: { payments: [paymentsSecret] } },
      readiness: { disk_free_bytes_min: diskFreeBytesMin },
    }),
  );
}

before(async () => {
  sink = await startH1Sink();
  const dir = scratch.tempDir('data');
  configFile = join(dir, 'fermata.json');
  writeConfig(tokens.reader, serviceSecret);
  service = await startService(join(dir, 'data'), (child) => scratch.children.add(child), { args: ['--config', configFile] });
});
after(async () => {
  service.child.kill('SIGTERM');
  await service.exited;
  await sink.close();
});

/**
 * A refusal is answered before the request's body is read, and the server's HTTP/2 stack then
 * ends the stream while the body may still be on its way (RFC 9113 §8.1 lets a server stop an
 * upload it does not need). Debian 12's curl (7.88) sometimes exits 92, "stream error in the
 * HTTP/2 framing layer", instead of printing the answer it got: about one run of this file in six,
 * on this commit and before. The answers are what these tests check, so such a request is sent
 * again (at most twice).
 */
async function call(method: string, path: string, token: string | undefined, body?: unknown, contentType?: string): Promise<CurlAnswer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await curlRequest({
        url: `${service.url}${path}`,
        method,
        protocol: 'http2',
        headers: { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...(contentType === undefined ? {} : { 'content-type': contentType }) },
        ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
      });
    } catch (err) {
      if (attempt < 3 && (err as { code?: unknown }).code === 92) continue;
      throw err;
    }
  }
}

function assertForbidden(answer: CurlAnswer, named: { scope?: string; queue?: string }, what: string): void {
  assert.equal(answer.status, 403, `${what}: ${text(answer)}`);
  const { error } = json<{ error: { code: string; scope?: string; queue?: string } }>(answer);
  assert.equal(error.code, 'FORBIDDEN', what);
  if (named.scope !== undefined) assert.equal(error.scope, named.scope, what);
  if (named.queue !== undefined) assert.equal(error.queue, named.queue, what);
}

const timer = (queue: string, path: string): Record<string, unknown> => ({ delay_ms: 0, target: `${sink.url}${path}`, payload: `to ${path}`, queue });

async function delivered(path: string): Promise<SinkRequest> {
  for (const deadline = Date.now() + 15_000; Date.now() < deadline; await sleep(20)) {
    const [request] = sink.to(path);
    if (request !== undefined) return request;
  }
  throw new Error(`nothing delivered to ${path}`);
}

const verdict = (request: SinkRequest, key: string): string => verifyWebhook(key, request.headers, request.body, { toleranceS: 300, nowMs: Date.now() });

async function logLine(pattern: RegExp): Promise<string> {
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; await sleep(20)) {
    const line = service.output().split('\n').find((candidate) => pattern.test(candidate));
    if (line !== undefined) return line;
  }
  throw new Error(`no log line matches ${pattern}:\n${service.output()}`);
}

test('each scope opens its routes only: 401 without a token, 403 naming the scope it lacks', async () => {
  const noToken = await call('GET', '/v1/stats', undefined);
  assert.equal(noToken.status, 401);
  assert.equal(noToken.headers['www-authenticate'], 'Bearer');
  assert.equal((await call('GET', '/healthz', undefined)).status, 200, 'health checks stay open');
  assert.equal((await call('GET', '/v1/stats', tokens.reader)).status, 200);
  assert.equal((await call('GET', '/metrics', tokens.reader)).status, 200);
  assertForbidden(await call('POST', '/v1/timers', tokens.reader, timer('default', '/r')), { scope: 'write' }, 'a reader adds');
  assertForbidden(await call('GET', '/v1/stats', tokens.writer), { scope: 'read' }, 'a writer reads stats');
  const added = await call('POST', '/v1/timers', tokens.writer, { ...timer('default', '/w'), delay_ms: 3_600_000 });
  assert.equal(added.status, 201, text(added));
  const { id } = json<{ id: string }>(added);
  assertForbidden(await call('GET', `/v1/timers/${id}`, tokens.writer), { scope: 'read' }, 'a writer looks up');
  for (const [method, path, body] of [
    ['DELETE', '/v1/queues/default/timers', undefined],
    ['POST', '/v1/timers/cancel', { queue: 'default' }],
    ['POST', '/v1/queues/default/pause', undefined],
    ['PUT', '/v1/queues/default', { max_attempts: 5 }],
    ['POST', '/v1/clock', { advance_ms: 1 }],
    ['POST', '/v1/admin/reload', undefined],
  ] as const) {
    assertForbidden(await call(method, path, tokens.writer, body), { scope: 'admin' }, `a writer: ${method} ${path}`);
  }
  assert.equal((await call('DELETE', `/v1/timers/${id}`, tokens.writer)).status, 200, 'a writer cancels one timer');
  const patched = await call('POST', '/v1/timers/cancel', tokens.admin, { queue: 'default', key_prefix: 'none-such' });
  assert.equal(patched.status, 200, 'the admin bulk-cancels');
});

test('a queue-limited token adds, lists and looks up in its queues only', async () => {
  const mine = await call('POST', '/v1/timers', tokens.payments, { ...timer('payments', '/p0'), delay_ms: 3_600_000 });
  assert.equal(mine.status, 201, text(mine));
  assertForbidden(await call('POST', '/v1/timers', tokens.payments, timer('default', '/p1')), { queue: 'default' }, 'an add to another queue');
  assertForbidden(await call('POST', '/v1/timers', tokens.payments, { ...timer('default', '/p1'), queue: undefined }), { queue: 'default' }, 'an add without a queue is the default queue\'s');
  const ndjson = [timer('payments', '/p2'), timer('default', '/p3')].map((row) => JSON.stringify(row)).join('\n');
  assertForbidden(await call('POST', '/v1/timers', tokens.payments, ndjson, 'application/x-ndjson'), { queue: 'default' }, 'a batch with another queue\'s row');
  const unfiltered = await call('GET', '/v1/timers', tokens.payments);
  assertForbidden(unfiltered, {}, 'a list without its queue');
  assert.match(text(unfiltered), /the \\"queue\\" query parameter must name one of them/);
  assertForbidden(await call('GET', '/v1/timers?queue=default', tokens.payments), { queue: 'default' }, 'a list of another queue');
  const listed = await call('GET', '/v1/timers?queue=payments', tokens.payments);
  assert.equal(listed.status, 200);
  assert.equal(json<{ timers: unknown[] }>(listed).timers.length, 1);
  const other = json<{ id: string }>(await call('POST', '/v1/timers', tokens.admin, { ...timer('default', '/p4'), delay_ms: 3_600_000 }));
  assertForbidden(await call('GET', `/v1/timers/${other.id}`, tokens.payments), { queue: 'default' }, 'another queue\'s timer');
  assertForbidden(await call('DELETE', `/v1/timers/${other.id}`, tokens.payments), { queue: 'default' }, 'a cancel of another queue\'s timer');
  assertForbidden(await call('PATCH', `/v1/timers/${json<{ id: string }>(mine).id}`, tokens.payments, { queue: 'default' }), { queue: 'default' }, 'a move to another queue');
  assert.equal((await call('GET', `/v1/timers/${json<{ id: string }>(mine).id}`, tokens.payments)).status, 200);
});

test('a queue with its own signing secrets signs with them; the others with the service\'s', async () => {
  assert.equal((await call('POST', '/v1/timers', tokens.writer, timer('payments', '/signed-payments'))).status, 201);
  assert.equal((await call('POST', '/v1/timers', tokens.writer, timer('default', '/signed-default'))).status, 201);
  const payments = await delivered('/signed-payments');
  const plain = await delivered('/signed-default');
  assert.equal(verdict(payments, paymentsSecret), 'valid');
  assert.equal(verdict(payments, serviceSecret), 'no_match');
  assert.equal(verdict(plain, serviceSecret), 'valid');
  assert.equal(verdict(plain, paymentsSecret), 'no_match');
});

test('audit: a purge and a pause are logged once with the token\'s name and how many, and counted', async () => {
  for (let n = 0; n < 3; n++) assert.equal((await call('POST', '/v1/timers', tokens.writer, { ...timer('audited', `/a${n}`), delay_ms: 3_600_000 })).status, 201);
  const purged = await call('DELETE', '/v1/queues/audited/timers', tokens.admin);
  assert.equal(json<{ cancelled: number }>(purged).cancelled, 3);
  assert.equal((await call('POST', '/v1/queues/audited/pause', tokens.admin)).status, 200);
  const purge = JSON.parse(await logLine(/"audit":"purge"/)) as Record<string, unknown>;
  assert.equal(purge.who, 'token-1');
  assert.equal(purge.name, 'audited');
  assert.equal(purge.count, 3);
  assert.equal(purge.level, 30, 'info');
  assert.ok(!service.output().includes(tokens.admin), 'the token itself is never logged');
  await logLine(/"audit":"pause","who":"token-1","name":"audited"/);
  assert.equal(service.output().split('\n').filter((line) => line.includes('"audit":"purge"')).length, 1, 'logged once');
  const metrics = text(await call('GET', '/metrics', tokens.reader));
  assert.match(metrics, /^fermata_audit_actions_total\{action="purge"\} 1$/m);
  assert.match(metrics, /^fermata_audit_actions_total\{action="pause"\} 1$/m);
});

test('reload: the endpoint swaps the tokens, a broken config file changes nothing, SIGHUP swaps the signing secret', async () => {
  writeConfig(tokens.reader2, serviceSecret);
  const reloaded = await call('POST', '/v1/admin/reload', tokens.admin);
  assert.equal(reloaded.status, 200, text(reloaded));
  assert.deepEqual(json(reloaded), { reloaded: true, changed: ['tokens'] });
  assert.equal((await call('GET', '/v1/stats', tokens.reader)).status, 401, 'the old token is refused');
  assert.equal((await call('GET', '/v1/stats', tokens.reader2)).status, 200, 'the new one is taken');
  await logLine(/"audit":"reload","who":"token-1","changed":\["tokens"\]/);

  writeFileSync(configFile, '{"tokens": [');
  const broken = await call('POST', '/v1/admin/reload', tokens.admin);
  assert.equal(broken.status, 422, text(broken));
  const { error } = json<{ error: { code: string; message: string } }>(broken);
  assert.equal(error.code, 'RELOAD_FAILED');
  assert.match(error.message, /not valid JSON/);
  await logLine(/"msg":"reload failed: the old settings stay in force"/);
  assert.equal((await call('GET', '/v1/stats', tokens.reader2)).status, 200, 'the settings before it stay');

  writeConfig(tokens.reader2, rotatedSecret);
  service.child.kill('SIGHUP');
  await logLine(/"audit":"reload","who":"SIGHUP","changed":\["signing_secrets"\]/);
  assert.equal((await call('POST', '/v1/timers', tokens.writer, timer('default', '/rotated'))).status, 201);
  const rotated = await delivered('/rotated');
  assert.equal(verdict(rotated, rotatedSecret), 'valid');
  assert.equal(verdict(rotated, serviceSecret), 'no_match');
  assert.match(text(await call('GET', '/metrics', tokens.reader2)), /^fermata_audit_actions_total\{action="reload"\} 2$/m);

  // The free-space minimum, the one limit the config file sets: /readyz and adds follow it at once.
  writeConfig(tokens.reader2, rotatedSecret, Number.MAX_SAFE_INTEGER);
  assert.deepEqual(json(await call('POST', '/v1/admin/reload', tokens.admin)), { reloaded: true, changed: ['readiness.disk_free_bytes_min'] });
  const readyz = await call('GET', '/readyz', undefined);
  assert.equal(readyz.status, 503);
  assert.match(text(readyz), /disk nearly full/);
  assert.equal((await call('POST', '/v1/timers', tokens.writer, timer('default', '/refused'))).status, 507);
  writeConfig(tokens.reader2, rotatedSecret);
  assert.equal((await call('POST', '/v1/admin/reload', tokens.admin)).status, 200);
  assert.equal((await call('GET', '/readyz', undefined)).status, 200);
});

test("GET /v1/stats shows the data directory's bytes, the free space and its minimum, and when the log last wrote durably", async () => {
  const before = Date.now();
  assert.equal((await call('POST', '/v1/timers', tokens.writer, { ...timer('default', '/stats'), delay_ms: 3_600_000 })).status, 201);
  let stats: { wal: { last_sync_at: string | null }; disk?: { data_bytes: number | null; free_bytes: number | null; free_bytes_min: number } } | undefined;
  // The directory's size is measured in the background: the first answer may come before it is.
  for (const deadline = Date.now() + 10_000; stats?.disk?.data_bytes === null || stats === undefined; await sleep(50)) {
    assert.ok(Date.now() < deadline, 'the data directory was measured');
    stats = json(await call('GET', '/v1/stats', tokens.reader2));
  }
  const { disk, wal } = stats;
  assert.ok(disk !== undefined && disk.data_bytes !== null && disk.data_bytes > 0, JSON.stringify(disk));
  assert.ok(disk.free_bytes !== null && disk.free_bytes > 0, JSON.stringify(disk));
  assert.equal(disk.free_bytes_min, 0, 'the configured minimum');
  assert.ok(wal.last_sync_at !== null && Date.parse(wal.last_sync_at) >= before - 1, `the add's group commit: ${wal.last_sync_at}`);
});
