// The v1 timer API as a client meets it: the real `fermata serve` in a child process on port 0,
// spoken to over HTTP/1.1 (fetch) and HTTP/2 with prior knowledge (node:http2), and once with
// curl. The same checks run over both protocols; then the service is killed (-9) and started
// again on the same data directory, and what was acknowledged must still be there. Every wait
// is bounded; every child is killed in `after`.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import { Binary, type Data, type DataType, Field, makeData, RecordBatch, Schema, Struct, Table, tableFromIPC, tableToIPC, Timestamp, TimeUnit, Type, Utf8 } from 'apache-arrow';
import { Engine } from '../../engine/engine.ts';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import { ingestLimits } from '../../engine/limits.ts';
import { errorAnswer } from '../../ingest/http/error-map.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { type Service, startService as startTrackedService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { curl, curlRequest, curlWithoutHttp2, json } from '../helpers/curl.ts';
import { skipOrFail, toolOrSkip } from '../helpers/tools.ts';
import { arrowIpcTestData as arrowTestData } from '../helpers/fixtures.ts';

const requestTimeoutMs = 10_000;
const arrowType = 'application/vnd.apache.arrow.stream';

const children = new Set<ChildProcess>();
const scratch: string[] = [];

after(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});


/** Starts `fermata serve` on `dataDir`, tracked for cleanup. */
function startService(dataDir: string): Promise<Service> {
  return startTrackedService(dataDir, (child) => children.add(child));
}

async function kill9(service: Service): Promise<void> {
  service.child.kill('SIGKILL');
  await withTimeout(service.exited, 10_000, 'fermata to die');
}

interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

interface RequestInit {
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string | Uint8Array;
}

/** One way of speaking to the service: HTTP/1.1 through fetch, or an HTTP/2 session. */
interface Client {
  readonly name: string;
  request(method: string, path: string, init?: RequestInit): Promise<Answer>;
  close(): void;
}

function fetchClient(base: string): Client {
  return {
    name: 'HTTP/1.1 (fetch)',
    async request(method, path, init = {}) {
      const response = await fetch(`${base}${path}`, {
        method,
        headers: init.headers ?? {},
        ...(init.body === undefined ? {} : { body: init.body }),
        signal: AbortSignal.timeout(requestTimeoutMs),
      });
      const headers: Record<string, string> = {};
      response.headers.forEach((value, name) => (headers[name] = value));
      return { status: response.status, headers, body: Buffer.from(await response.arrayBuffer()) };
    },
    close() {},
  };
}

async function h2Client(base: string): Promise<Client> {
  const session = http2.connect(base);
  session.on('error', () => undefined);
  await withTimeout(
    new Promise<void>((resolve, reject) => {
      session.once('connect', () => resolve());
      session.once('error', reject);
    }),
    5_000,
    'an HTTP/2 session',
  );
  assert.equal(session.alpnProtocol, 'h2c');
  return {
    name: 'HTTP/2 (prior knowledge)',
    request(method, path, init = {}) {
      const answer = new Promise<Answer>((resolve, reject) => {
        const stream = session.request({ ':method': method, ':path': path, ...init.headers });
        let status = 0;
        const headers: Record<string, string> = {};
        const chunks: Buffer[] = [];
        stream.on('response', (received) => {
          status = Number(received[':status']);
          for (const [name, value] of Object.entries(received)) if (!name.startsWith(':')) headers[name] = String(value);
        });
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        // A server may answer before it has read the whole body (413) and then reset the stream.
        stream.on('close', () => (status === 0 ? reject(new Error(`HTTP/2 ${method} ${path}: stream closed without a response`)) : resolve({ status, headers, body: Buffer.concat(chunks) })));
        stream.on('error', () => undefined);
        stream.end(init.body === undefined ? undefined : Buffer.from(init.body));
      });
      return withTimeout(answer, requestTimeoutMs, `HTTP/2 ${method} ${path}`);
    },
    close() {
      session.close();
    },
  };
}

const jsonOf = (answer: Answer): unknown => JSON.parse(answer.body.toString('utf8'));

function postJson(client: Client, path: string, value: unknown, method = 'POST'): Promise<Answer> {
  return client.request(method, path, { headers: { 'content-type': 'application/json' }, body: JSON.stringify(value) });
}

function postNdjson(client: Client, lines: readonly string[], accept?: string): Promise<Answer> {
  return client.request('POST', '/v1/timers', {
    headers: { 'content-type': 'application/x-ndjson', ...(accept === undefined ? {} : { accept }) },
    body: lines.join('\n') + '\n',
  });
}

function postArrow(client: Client, ipc: Uint8Array, accept?: string): Promise<Answer> {
  return client.request('POST', '/v1/timers', { headers: { 'content-type': arrowType, ...(accept === undefined ? {} : { accept }) }, body: ipc });
}

interface ErrorShape {
  readonly error: { readonly code: string; readonly message: string; readonly field?: string; readonly column?: string; readonly row?: number; readonly line?: number };
}

/** Asserts fermata's JSON error shape and status; returns the error for further checks. */
function assertError(answer: Answer, status: number, code: string): ErrorShape['error'] {
  assert.equal(answer.status, status, `status ${answer.status}: ${answer.body.toString('utf8')}`);
  assert.match(answer.headers['content-type'] ?? '', /^application\/json/);
  const body = jsonOf(answer) as ErrorShape;
  assert.equal(typeof body.error, 'object', `an {"error": …} body: ${answer.body.toString('utf8')}`);
  assert.equal(body.error.code, code);
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
  return body.error;
}

/**
 * Timers stored and not cancelled: pending, in flight, delivered or dead. A timer an earlier test
 * added for soon may fire between two readings (CI on a loaded machine saw it): it moves from
 * pending to delivered, and this count stays the same.
 */
async function pendingCount(client: Client): Promise<number> {
  const answer = await client.request('GET', '/v1/stats');
  assert.equal(answer.status, 200);
  const stats = jsonOf(answer) as { pending: number; in_flight: number; delivered: number; dead: number };
  return stats.pending + stats.in_flight + stats.delivered + stats.dead;
}

interface TimerView {
  readonly id: string;
  readonly state: string;
  readonly fire_at: string;
  readonly attempts: number;
  readonly queue: string;
  readonly key: string | null;
  readonly last_status: number | null;
  readonly last_error: string | null;
  readonly last_attempt_at: string | null;
  readonly next_attempt_at: string | null;
  readonly created_at: string | null;
}

async function getTimer(client: Client, id: string): Promise<TimerView> {
  const answer = await client.request('GET', `/v1/timers/${id}`);
  assert.equal(answer.status, 200, `GET ${id}: ${answer.body.toString('utf8')}`);
  return jsonOf(answer) as TimerView;
}

/** Strings as a Utf8 (or Binary) column: one values buffer and row offsets. */
function bytesColumn(strings: readonly string[], binary: boolean): Data<DataType> {
  const parts = strings.map((s) => Buffer.from(s));
  const valueOffsets = new Int32Array(parts.length + 1);
  for (let i = 0; i < parts.length; i++) valueOffsets[i + 1] = (valueOffsets[i] as number) + (parts[i] as Buffer).length;
  const data = Buffer.concat(parts);
  return binary ? makeData({ type: new Binary(), length: parts.length, valueOffsets, data }) : makeData({ type: new Utf8(), length: parts.length, valueOffsets, data });
}

/** An Arrow IPC stream as a typical producer sends it: fire_at Timestamp(ms), target Utf8, payload Binary, key Utf8. */
function timersArrow(rows: ReadonlyArray<{ fireAtMs: number; target: string; payload: string; key: string }>): Uint8Array {
  const columns: Array<[string, Data<DataType>]> = [
    ['fire_at', makeData({ type: new Timestamp(TimeUnit.MILLISECOND, 'UTC'), length: rows.length, data: BigInt64Array.from(rows, (row) => BigInt(row.fireAtMs)) })],
    ['target', bytesColumn(rows.map((row) => row.target), false)],
    ['payload', bytesColumn(rows.map((row) => row.payload), true)],
    ['key', bytesColumn(rows.map((row) => row.key), false)],
  ];
  const schema = new Schema(columns.map(([name, data]) => new Field(name, data.type, false)));
  const struct = makeData({ type: new Struct(schema.fields), length: rows.length, children: columns.map(([, data]) => data) });
  return tableToIPC(new Table([new RecordBatch(schema, struct)]), 'stream');
}

/** The id and duplicate columns of an Arrow answer, after checking its schema. */
function readIdsAnswer(answer: Answer): { ids: string[]; duplicates: boolean[] } {
  assert.equal(answer.status, 201, answer.body.toString('utf8'));
  assert.equal(answer.headers['content-type'], arrowType);
  const table = tableFromIPC(answer.body);
  assert.deepEqual(
    table.schema.fields.map((field) => [field.name, field.type.typeId]),
    [
      ['id', Type.Utf8],
      ['duplicate', Type.Bool],
      ['state', Type.Utf8],
      ['differs', Type.List],
      ['revision', Type.Int],
    ],
  );
  const ids = [...(table.getChild('id') ?? [])].map(String);
  const duplicates = [...(table.getChild('duplicate') ?? [])].map((value) => value === true);
  return { ids, duplicates };
}

/** Requests with a body larger than `limit` would take; the raw HTTP/1.1 answer to a request that only declares it. */
async function rawDeclaredLength(port: number, contentType: string, contentLength: number): Promise<string> {
  const socket = net.connect({ port, host: '127.0.0.1' });
  socket.on('error', () => undefined);
  let received = '';
  socket.setEncoding('latin1').on('data', (chunk: string) => (received += chunk));
  try {
    await withTimeout(new Promise((resolve) => socket.once('connect', resolve)), 5_000, 'a TCP connection');
    socket.write(`POST /v1/timers HTTP/1.1\r\nHost: fermata\r\nContent-Type: ${contentType}\r\nContent-Length: ${contentLength}\r\n\r\n`);
    await withTimeout(
      new Promise<void>((resolve) => {
        const check = (): void => {
          const end = received.indexOf('\r\n\r\n');
          const length = /content-length: (\d+)/i.exec(received);
          if (end >= 0 && length !== null && received.length >= end + 4 + Number(length[1])) resolve();
        };
        socket.on('data', check);
        socket.on('close', () => resolve());
      }),
      5_000,
      'the answer to a declared oversized body',
    );
    return received;
  } finally {
    socket.destroy();
  }
}


const target = 'https://hooks.example.com/fire';
const inAnHour = (): number => Date.now() + 3_600_000;

/** What one protocol's run acknowledged, checked again after the restart. */
interface Acknowledged {
  readonly ids: string[];
  readonly key: string;
  readonly keyId: string;
  readonly cancelledId: string;
}

describe('the v1 timer API over a real service', { timeout: 180_000 }, () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'fermata-timers-api-'));
  scratch.push(dataDir);
  let service: Service;
  const acknowledged: Acknowledged[] = [];

  before(async () => {
    service = await startService(dataDir);
  });

  for (const [label, connect] of [
    ['HTTP/1.1', (url: string) => Promise.resolve(fetchClient(url))],
    ['HTTP/2', h2Client],
  ] as const) {
    describe(label, () => {
      let client: Client;
      const tag = label === 'HTTP/1.1' ? 'h1' : 'h2';
      const record: Acknowledged = { ids: [], key: `order-${tag}-42`, keyId: '', cancelledId: '' };

      before(async () => {
        client = await connect(service.url);
        acknowledged.push(record);
      });
      after(() => client.close());

      test('a JSON timer: 201 with its id and fire_at; GET shows it pending with every field', async () => {
        const fireAtMs = inAnHour();
        const answer = await postJson(client, '/v1/timers', { fire_at: new Date(fireAtMs).toISOString(), target, payload: 'hello', key: record.key, queue: 'billing', headers: { 'x-trace': 't1' } });
        assert.equal(answer.status, 201, answer.body.toString('utf8'));
        const added = jsonOf(answer) as { id: string; fire_at: string; duplicate: boolean };
        assert.deepEqual(Object.keys(added).sort(), ['duplicate', 'fire_at', 'id', 'revision']);
        assert.match(added.id, /^[0-9a-z]{24}$/);
        assert.equal(added.fire_at, new Date(fireAtMs).toISOString());
        assert.equal(added.duplicate, false);
        const addedBy = Date.now();
        const view = await getTimer(client, added.id);
        const createdAtMs = Date.parse(String(view.created_at));
        assert.ok(createdAtMs >= fireAtMs - 3_600_000 && createdAtMs <= addedBy, `created_at ${String(view.created_at)} is when the add was accepted`);
        assert.deepEqual(view, { created_at: view.created_at, id: added.id, state: 'pending', revision: 1, fire_at: added.fire_at, attempts: 0, queue: 'billing', key: record.key, last_status: null, last_error: null, last_attempt_at: null, next_attempt_at: null, callback: null, failure_callback: null, target, headers: { 'x-trace': 't1' }, payload: 'hello', payload_base64: null });
        record.ids.push(added.id);
        Object.assign(record, { keyId: added.id });

        const relative = await postJson(client, '/v1/timers', { delay_ms: 60_000, target, payload_base64: Buffer.from([0, 1, 2, 255]).toString('base64') });
        assert.equal(relative.status, 201);
        const { id, fire_at } = jsonOf(relative) as { id: string; fire_at: string };
        const due = Date.parse(fire_at) - Date.now();
        assert.ok(due > 50_000 && due <= 60_000, `delay_ms is relative to now: due in ${due} ms`);
        assert.equal((await getTimer(client, id)).queue, 'default');
        record.ids.push(id);

        // An RFC 3339 offset is honoured, and a time finer than a millisecond rounds up (never early).
        const precise = await postJson(client, '/v1/timers', { fire_at: '2031-03-04T06:07:08.1231+01:00', target });
        assert.equal(precise.status, 201);
        const preciseId = (jsonOf(precise) as { id: string; fire_at: string }).id;
        assert.equal((jsonOf(precise) as { fire_at: string }).fire_at, '2031-03-04T05:07:08.124Z');
        record.ids.push(preciseId);
        const epoch = await postJson(client, '/v1/timers', { fire_at: Date.UTC(2031, 0, 1), target });
        assert.equal((jsonOf(epoch) as { fire_at: string }).fire_at, '2031-01-01T00:00:00.000Z');
        record.ids.push((jsonOf(epoch) as { id: string }).id);
      });

      test('the same key again: 200, the original id and fire_at, duplicate: true, nothing added', async () => {
        const before = await pendingCount(client);
        const answer = await postJson(client, '/v1/timers', { delay_ms: 5_000, target: 'https://other.example.com/', key: record.key });
        assert.equal(answer.status, 200, answer.body.toString('utf8'));
        const original = await getTimer(client, record.keyId);
        assert.deepEqual(jsonOf(answer), { id: record.keyId, fire_at: original.fire_at, revision: 1, duplicate: true, state: 'pending', differs: ['target', 'payload', 'headers', 'queue'] });
        assert.equal(await pendingCount(client), before);
      });

      test('bad JSON timers: 400 naming the field; nothing stored', async () => {
        const before = await pendingCount(client);
        const cases: Array<[unknown, string, RegExp]> = [
          [{ fire_at: inAnHour(), target, colour: 'red' }, 'colour', /unknown field "colour"/],
          [{ target }, 'fire_at', /fire_at and delay_ms/],
          [{ fire_at: inAnHour(), delay_ms: 5, target }, 'delay_ms', /not both/],
          [{ fire_at: '31/12/2030', target }, 'fire_at', /RFC 3339/],
          [{ delay_ms: -1, target }, 'delay_ms', /≥ 0/],
          [{ delay_ms: 1, target: 'ftp://files.example.com/' }, 'target', /http\(s\) URL/],
          [{ delay_ms: 1, target, headers: { 'x-n': 1 } }, 'headers', /string/],
          [{ delay_ms: 1, target, payload_base64: 'not base64!' }, 'payload_base64', /base64/],
          [{ delay_ms: 1, target, queue: 'no spaces' }, 'queue', /queue must be/],
        ];
        for (const [timer, field, message] of cases) {
          const error = assertError(await postJson(client, '/v1/timers', timer), 400, 'BATCH_INVALID');
          assert.equal(error.field, field, JSON.stringify(timer));
          assert.match(error.message, message);
          assert.equal(error.row, undefined, 'a single timer has no row');
        }
        assert.equal(await pendingCount(client), before);
      });

      test('NDJSON with a bad target on line 2: 400 naming row 1, line 2 and the field; nothing stored', async () => {
        const before = await pendingCount(client);
        const lines = [
          JSON.stringify({ delay_ms: 60_000, target }),
          JSON.stringify({ delay_ms: 60_000, target: 'not a url' }),
          JSON.stringify({ delay_ms: 60_000, target }),
        ];
        const error = assertError(await postNdjson(client, lines), 400, 'BATCH_INVALID');
        assert.deepEqual([error.field, error.row, error.line], ['target', 1, 2]);
        assert.match(error.message, /row 1 \(line 2\)/);

        // Rows are counted without blank lines; lines with them. A parse error names its line too.
        const withBlank = assertError(await postNdjson(client, [lines[0] as string, '', '{"delay_ms": 1, "target": '], undefined), 400, 'BATCH_INVALID');
        assert.deepEqual([withBlank.row, withBlank.line], [1, 3]);
        const unknown = assertError(await postNdjson(client, [lines[0] as string, '', JSON.stringify({ delay_ms: 1, target, when: 'now' })]), 400, 'BATCH_INVALID');
        assert.deepEqual([unknown.field, unknown.row, unknown.line], ['when', 1, 3]);
        // Refused by the engine's validation (not the JSON reader): still named by row and line.
        const badQueue = assertError(await postNdjson(client, ['', lines[0] as string, '', '', JSON.stringify({ delay_ms: 1, target, queue: 'a queue' })]), 400, 'BATCH_INVALID');
        assert.deepEqual([badQueue.field, badQueue.row, badQueue.line], ['queue', 1, 5]);
        assert.match(badQueue.message, /row 1 \(line 5\)/);
        assert.equal(await pendingCount(client), before, 'a refused batch stores nothing');
      });

      test('good NDJSON: 201 {accepted: 3, duplicates: 0}; with Accept: Arrow, an Arrow stream of ids', async () => {
        const before = await pendingCount(client);
        const lines = [0, 1, 2].map((i) => JSON.stringify({ fire_at: inAnHour() + i, target, payload: `n${i}`, key: `nd-${tag}-${i}` }));
        const answer = await postNdjson(client, lines);
        assert.equal(answer.status, 201, answer.body.toString('utf8'));
        const added = jsonOf(answer) as { accepted: number; duplicates: number; ids: string[]; duplicate_rows: unknown[] };
        assert.deepEqual([added.accepted, added.duplicates, added.ids.length, added.duplicate_rows], [3, 0, 3, []]);
        assert.equal(await pendingCount(client), before + 3);

        const again = readIdsAnswer(await postNdjson(client, [...lines.slice(1), JSON.stringify({ delay_ms: 1_000, target })], arrowType));
        assert.deepEqual(again.duplicates, [true, true, false]);
        for (const [row, id] of again.ids.entries()) {
          const view = await getTimer(client, id);
          if (row < 2) assert.equal(view.key, `nd-${tag}-${row + 1}`, 'a duplicate row answers the original id');
          record.ids.push(id);
        }
        assert.equal(await pendingCount(client), before + 4);
      });

      test('an Arrow stream: 201 {accepted, duplicates}; with Accept: Arrow, ids row-aligned that GET finds', async () => {
        const before = await pendingCount(client);
        const base = inAnHour();
        const plain = await postArrow(client, timersArrow([0, 1].map((i) => ({ fireAtMs: base + i, target, payload: `a${i}`, key: `arrow-${tag}-${i}` }))));
        assert.equal(plain.status, 201, plain.body.toString('utf8'));
        const added = jsonOf(plain) as { accepted: number; duplicates: number; ids: string[]; duplicate_rows: unknown[] };
        assert.deepEqual([added.accepted, added.duplicates, added.ids.length, added.duplicate_rows], [2, 0, 2, []]);

        const rows = [
          { fireAtMs: base + 10, target, payload: 'x', key: `arrow-${tag}-10` },
          { fireAtMs: base + 11, target, payload: 'y', key: `arrow-${tag}-1` },
          { fireAtMs: base + 12, target: 'https://second.example.com/', payload: 'z', key: `arrow-${tag}-12` },
        ];
        const { ids, duplicates } = readIdsAnswer(await postArrow(client, timersArrow(rows), arrowType));
        assert.equal(ids.length, 3);
        assert.deepEqual(duplicates, [false, true, false]);
        for (const [row, id] of ids.entries()) {
          const view = await getTimer(client, id);
          assert.equal(view.state, 'pending');
          assert.equal(view.key, (rows[row] as { key: string }).key);
          if (row !== 1) assert.equal(view.fire_at, new Date((rows[row] as { fireAtMs: number }).fireAtMs).toISOString());
          record.ids.push(id);
        }
        assert.equal(await pendingCount(client), before + 4);
      });

      test('DELETE: 200 cancelled, again 200 cancelled, GET shows it cancelled; unknown ids 404', async () => {
        const added = await postJson(client, '/v1/timers', { delay_ms: 600_000, target });
        const { id } = jsonOf(added) as { id: string };
        const before = await pendingCount(client);
        for (let i = 0; i < 2; i++) {
          const answer = await client.request('DELETE', `/v1/timers/${id}`);
          assert.equal(answer.status, 200, answer.body.toString('utf8'));
          assert.deepEqual(jsonOf(answer), { id, state: 'cancelled', revision: 1 });
        }
        assert.equal((await getTimer(client, id)).state, 'cancelled');
        assert.equal(await pendingCount(client), before - 1);
        record.ids.push(id);
        Object.assign(record, { cancelledId: id });

        const wellFormedUnknown = `zzzz${id.slice(4)}`;
        for (const unknown of [wellFormedUnknown, 'not-an-id']) {
          assertError(await client.request('DELETE', `/v1/timers/${unknown}`), 404, 'NOT_FOUND');
          assertError(await client.request('GET', `/v1/timers/${unknown}`), 404, 'NOT_FOUND');
        }
      });

      test('PUT /v1/queues/{name}: 200 with the queue as GET /v1/queues lists it (name, the whole config, paused); a bad field or name is a 400 naming it', async () => {
        const name = `mail-${tag}`;
        const put = await postJson(client, `/v1/queues/${name}`, { max_attempts: 5, rate_per_s: 100 }, 'PUT');
        assert.equal(put.status, 200, put.body.toString('utf8'));
        const config = { max_attempts: 5, min_backoff_ms: 1_000, max_backoff_ms: 3_600_000, max_doublings: 16, rate_per_s: 100, max_concurrent: null, timeout_ms: 30_000, delivery: 'request', sink: null, batch_rows_max: 10_000, linger_ms: 50, retention_ms: null, dead_retention_ms: null, max_pending: null };
        assert.deepEqual(jsonOf(put), { name, ...config, paused: false });
        const list = await client.request('GET', '/v1/queues');
        assert.equal(list.status, 200);
        const queues = (jsonOf(list) as { queues: Array<{ name: string }> }).queues;
        assert.deepEqual(
          queues.find((queue) => queue.name === name),
          { name, ...config, paused: false, pending: 0, in_flight: 0, delivered_per_s: 0 },
        );
        assert.ok(queues.some((queue) => queue.name === 'billing'), 'a queue that has held a timer is listed');

        const badField = assertError(await postJson(client, `/v1/queues/${name}`, { max_atempts: 3 }, 'PUT'), 400, 'QUEUE_INVALID');
        assert.equal(badField.field, 'max_atempts');
        const badValue = assertError(await postJson(client, `/v1/queues/${name}`, { max_attempts: 0 }, 'PUT'), 400, 'QUEUE_INVALID');
        assert.equal(badValue.field, 'max_attempts');
        const badName = assertError(await postJson(client, '/v1/queues/bad!name', {}, 'PUT'), 400, 'QUEUE_INVALID');
        assert.equal(badName.field, 'name');
        // The configs, without each queue's figures now (its timers and rate move as timers go out).
        const configs = (answer: Answer): unknown[] => (jsonOf(answer) as { queues: Array<Record<string, unknown>> }).queues.map(({ pending, in_flight, delivered_per_s, ...queue }) => queue);
        assert.deepEqual(configs(await client.request('GET', '/v1/queues')), configs(list), 'refused configs changed nothing');
      });

      test('malformed JSON: 400 with the JSON error shape; an unsupported or missing content type: 415', async () => {
        const malformed = await client.request('POST', '/v1/timers', { headers: { 'content-type': 'application/json' }, body: '{"delay_ms": 1, "target": ' });
        assert.match(assertError(malformed, 400, 'BODY_INVALID').message, /not valid JSON/);
        assertError(await client.request('PUT', '/v1/queues/default', { headers: { 'content-type': 'application/json' }, body: '[1,' }), 400, 'BODY_INVALID');
        for (const type of ['text/plain', 'application/xml', 'text/csv']) {
          const answer = await client.request('POST', '/v1/timers', { headers: { 'content-type': type }, body: 'fire_at,target' });
          assert.match(assertError(answer, 415, 'UNSUPPORTED_MEDIA_TYPE').message, /application\/x-ndjson/);
        }
        assertError(await client.request('POST', '/v1/timers'), 415, 'UNSUPPORTED_MEDIA_TYPE');
        assert.match(assertError(await postArrow(client, new Uint8Array(0)), 400, 'BATCH_INVALID').message, /empty/);
        assert.match(assertError(await postJson(client, '/v1/timers', [{ delay_ms: 1, target }]), 400, 'BATCH_INVALID').message, /x-ndjson/);
      });

      test(`a JSON body over ${ingestLimits.jsonBodyBytesMax} bytes: 413, nothing stored, the server still answers`, async () => {
        const before = await pendingCount(client);
        if (label === 'HTTP/1.1') {
          // fastify answers 413 before reading the body and closes the connection: a client still
          // writing may meet the reset before it reads the answer. Declaring the length alone is
          // the deterministic way to see the answer (the HTTP/2 run sends a whole body).
          const raw = await rawDeclaredLength(service.port, 'application/json', ingestLimits.jsonBodyBytesMax + 1);
          assert.match(raw, /^HTTP\/1\.1 413 /);
          assert.match(raw, /\{"error":\{"code":"BODY_TOO_LARGE","message":"[^"]+"\}\}$/);
        } else {
          const body = JSON.stringify({ delay_ms: 1, target, payload: 'x'.repeat(ingestLimits.jsonBodyBytesMax) });
          assertError(await client.request('POST', '/v1/timers', { headers: { 'content-type': 'application/json' }, body }), 413, 'BODY_TOO_LARGE');
        }
        assert.equal(await pendingCount(client), before);
        assert.equal((await client.request('GET', '/healthz')).status, 200);
      });

      test('every Arrow IPC file of the malformed, valid and compressed test data: a 4xx JSON error, never a 5xx; the server stays healthy', async () => {
        const before = await pendingCount(client);
        let posted = 0;
        for (const folder of ['malformed', 'valid', 'compressed']) {
          const dir = new URL(`${folder}/`, arrowTestData);
          for (const name of readdirSync(dir)) {
            const answer = await postArrow(client, readFileSync(new URL(name, dir)));
            const what = `${folder}/${name}: ${answer.status} ${answer.body.toString('utf8')}`;
            assert.ok(answer.status >= 400 && answer.status < 500, what);
            const error = assertError(answer, answer.status, 'BATCH_INVALID');
            if (folder === 'compressed') assert.match(error.message, /compress/i, what);
            posted++;
          }
        }
        assert.ok(posted >= 90, `all the test files were posted (${posted})`);
        assert.equal((await client.request('GET', '/healthz')).status, 200);
        assert.equal(await pendingCount(client), before);
      });

      test('GET /v1/stats: the counts and the WAL', async () => {
        const answer = await client.request('GET', '/v1/stats');
        assert.equal(answer.status, 200);
        const stats = jsonOf(answer) as Record<string, unknown> & { wal: Record<string, unknown>; memory: Record<string, number> };
        assert.deepEqual(Object.keys(stats).sort(), ['bulk_cancels', 'cancelled', 'cancelled_in_bulk', 'dead', 'delivered', 'disk', 'held', 'held_released', 'horizon', 'in_flight', 'memory', 'paused_queues', 'pending', 'reschedules', 'resident', 'schedules', 'spilled', 'wal']);
        // The service runs the memory loader: a budget from the machine, and these few timers well under it.
        assert.ok(Number.isSafeInteger(stats.memory.budget_bytes) && (stats.memory.budget_bytes as number) > 0);
        assert.ok((stats.memory.resident_bytes as number) > 0 && (stats.memory.resident_bytes as number) < (stats.memory.budget_bytes as number));
        assert.ok((stats.memory.add_times_bytes as number) > 0, 'the accept times of the adds held are counted');
        assert.ok((stats.pending as number) >= 10);
        assert.ok((stats.cancelled as number) >= 1);
        assert.equal(stats.spilled, 0);
        assert.equal(stats.horizon, null);
        assert.equal(stats.resident, (stats.pending as number) + (stats.cancelled as number) + (stats.in_flight as number) + (stats.delivered as number) + (stats.dead as number));
        assert.equal(stats.wal.poisoned, false);
        assert.ok((stats.wal.last_seq as number) >= 5 && (stats.wal.syncs as number) >= 1 && (stats.wal.appends as number) >= 5);
        assert.equal(typeof stats.wal.last_sync_at, 'string', 'the adds were written durably');
      });
    });
  }

  test('a body declared over the bulk limit is refused at once with 413, before it is sent', async () => {
    const raw = await rawDeclaredLength(service.port, arrowType, ingestLimits.bodyBytesMax + 1);
    assert.match(raw, /^HTTP\/1\.1 413 /);
    assert.match(raw, /"code":"BODY_TOO_LARGE"/);
  });

  test('curl --http2-prior-knowledge adds a JSON timer', async (t) => {
    if (toolOrSkip(t, 'curl') === undefined) return;
    if (!curl.http2) return skipOrFail(t, curlWithoutHttp2);
    const body = JSON.stringify({ delay_ms: 120_000, target, payload: 'from curl' });
    const answer = await curlRequest({ protocol: 'http2', url: `${service.url}/v1/timers`, body });
    assert.deepEqual([answer.status, answer.httpVersion], [201, '2']);
    const added = json<{ id: string; duplicate: boolean }>(answer);
    assert.equal(added.duplicate, false);
    const client = fetchClient(service.url);
    assert.equal((await getTimer(client, added.id)).state, 'pending');
  });

  test('after kill -9 and a restart on the same data directory: every acknowledged timer is there, and a known key is still a duplicate', async () => {
    assert.equal(acknowledged.length, 2, 'both protocol runs recorded what they added');
    const client = fetchClient(service.url);
    const expected = new Map<string, TimerView>();
    for (const { ids } of acknowledged) for (const id of ids) expected.set(id, await getTimer(client, id));
    assert.ok(expected.size >= 16, `ids recorded: ${expected.size}`);
    await kill9(service);

    service = await startService(dataDir);
    const restarted = fetchClient(service.url);
    // Due timers are being delivered (to a target that does not resolve here, so they retry):
    // their state and attempts move on; what was acknowledged must not.
    const stable = (view: TimerView): Partial<TimerView> => {
      if (view.state === 'cancelled' || Date.parse(view.fire_at) > Date.now() + 60_000) return view;
      const { state: _state, attempts: _attempts, last_status: _lastStatus, last_error: _error, last_attempt_at: _attemptAt, next_attempt_at: _nextAt, ...acknowledgedPart } = view;
      return acknowledgedPart;
    };
    for (const [id, view] of expected) assert.deepEqual(stable(await getTimer(restarted, id)), stable(view));
    for (const { key, keyId, cancelledId } of acknowledged) {
      const again = await postJson(restarted, '/v1/timers', { delay_ms: 1, target, key });
      assert.equal(again.status, 200, again.body.toString('utf8'));
      const { state: _state, differs, ...answer } = jsonOf(again) as Record<string, unknown>;
      assert.deepEqual(answer, { id: keyId, fire_at: expected.get(keyId)?.fire_at, revision: 1, duplicate: true });
      assert.deepEqual(differs, ['payload', 'headers', 'queue'], 'compared with the timer replayed after the restart');
      assert.equal((await getTimer(restarted, cancelledId)).state, 'cancelled');
    }
    const session = await h2Client(service.url);
    try {
      assert.deepEqual(await getTimer(session, acknowledged[0]?.keyId ?? ''), expected.get(acknowledged[0]?.keyId ?? ''));
    } finally {
      session.close();
    }
    await kill9(service);
  });
});

/** The API served in process over an engine on a simulated disk, for conditions a real disk will not produce on demand. */
async function inProcess(options: { fs: SimFileSystem; capacityMax?: number; recordBodyBytesMax?: number }): Promise<{ client: Client; close(): Promise<void> }> {
  const engine = await Engine.open({
    dataDir: '/data',
    fs: options.fs,
    ...(options.capacityMax === undefined ? {} : { store: { capacityInitial: options.capacityMax, capacityMax: options.capacityMax } }),
    ...(options.recordBodyBytesMax === undefined ? {} : { walLimits: { recordBodyBytesMax: options.recordBodyBytesMax } }),
  });
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const client = await h2Client(`http://127.0.0.1:${(app.server.address() as net.AddressInfo).port}`);
  return {
    client,
    async close() {
      client.close();
      await app.close();
      await engine.close();
    },
  };
}

describe('overload and disk failures answer with their status, never a 2xx', () => {
  test('a full store: 503 CAPACITY_FULL with Retry-After: 1; a record over the WAL limit: 413', async () => {
    const api = await inProcess({ fs: new SimFileSystem({ seed: 5 }), capacityMax: 2, recordBodyBytesMax: 4_096 });
    try {
      assertError(await postJson(api.client, '/v1/timers', { delay_ms: 60_000, target, payload: 'x'.repeat(5_000) }), 413, 'WAL_RECORD_TOO_LARGE');
      for (let i = 0; i < 2; i++) assert.equal((await postJson(api.client, '/v1/timers', { delay_ms: 60_000, target })).status, 201);
      const full = await postJson(api.client, '/v1/timers', { delay_ms: 60_000, target });
      assertError(full, 503, 'CAPACITY_FULL');
      assert.equal(full.headers['retry-after'], '1');
      assert.equal(await pendingCount(api.client), 2);
    } finally {
      await api.close();
    }
  });

  for (const [errno, status] of [
    ['ENOSPC', 507],
    ['EIO', 503],
  ] as const) {
    test(`an fdatasync failing with ${errno} poisons the log: the add is answered ${status} WAL_POISONED, and so is the next; /readyz turns 503`, async () => {
      const fs = new SimFileSystem({ seed: 6 });
      const api = await inProcess({ fs });
      try {
        assert.equal((await postJson(api.client, '/v1/timers', { delay_ms: 60_000, target })).status, 201);
        fs.failAfter('datasync', 0, errno);
        const failed = await postJson(api.client, '/v1/timers', { delay_ms: 60_000, target, key: 'k' });
        assert.match(assertError(failed, status, 'WAL_POISONED').message, /WAL poisoned/);
        assertError(await postJson(api.client, '/v1/timers', { delay_ms: 60_000, target, key: 'k' }), status, 'WAL_POISONED');
        assertError(await postJson(api.client, '/v1/queues/q', {}, 'PUT'), status, 'WAL_POISONED');
        assert.equal((await api.client.request('GET', '/readyz')).status, 503);
        const stats = jsonOf(await api.client.request('GET', '/v1/stats')) as { pending: number; wal: { poisoned: boolean } };
        assert.deepEqual([stats.pending, stats.wal.poisoned], [1, true]);
      } finally {
        await api.close();
      }
    });
  }

  test('the error map: every code has its status and Retry-After; unknown errors are 500 INTERNAL without their text', () => {
    const cases: Array<[FermataError, number, string | undefined]> = [
      [new FermataError(errorCodes.batchInvalid, 'b', { column: 'target', row: 3 }), 400, undefined],
      [new FermataError(errorCodes.queueInvalid, 'q', { field: 'max_attempts' }), 400, undefined],
      [new FermataError(errorCodes.capacityFull, 'c'), 503, '1'],
      [new FermataError(errorCodes.walQueueFull, 'w'), 429, '1'],
      [new FermataError(errorCodes.walPoisoned, 'p', { cause: 'EIO' }), 503, '1'],
      [new FermataError(errorCodes.walPoisoned, 'p', { cause: 'ENOSPC' }), 507, '1'],
      [new FermataError(errorCodes.diskFull, 'd'), 507, '5'],
      [new FermataError(errorCodes.walRecordTooLarge, 'r'), 413, undefined],
      [new FermataError(errorCodes.walClosed, 'closed'), 503, '1'],
      [new FermataError(errorCodes.walCorrupt, 'corrupt'), 500, undefined],
    ];
    for (const [err, status, retryAfter] of cases) {
      const answer = errorAnswer(err, undefined);
      assert.equal(answer.status, status, err.code);
      assert.equal(answer.retryAfterSeconds === undefined ? undefined : String(answer.retryAfterSeconds), retryAfter, err.code);
      assert.equal(answer.body.error.code, err.code);
    }
    assert.deepEqual(errorAnswer(new FermataError(errorCodes.batchInvalid, 'b', { column: 'target', row: 3 }), undefined).body, {
      error: { code: 'BATCH_INVALID', message: 'b', column: 'target', row: 3 },
    });
    const bug = errorAnswer(new TypeError('secret internals'), 'application/json');
    assert.equal(bug.status, 500);
    assert.equal(bug.unexpected, true);
    assert.equal(bug.body.error.code, 'INTERNAL');
    assert.doesNotMatch(bug.body.error.message, /secret/);
  });
});
