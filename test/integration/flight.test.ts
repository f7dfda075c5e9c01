// The Arrow Flight service (`fermata serve --flight`) as clients no one here wrote speak it:
// pyarrow.flight (in the cached venv of test/helpers/python-venv.ts) runs
// test/fixtures/pyarrow_flight_client.py — a million rows by DoPut, due rows delivered to a
// sink byte for byte, refusals, ListFlights, bearer tokens — and this test checks its summary
// against the service over HTTP. A second test sends what pyarrow never would (malformed
// protobuf, forged IPC headers, mutated messages) with a bare grpc-js client: each call ends
// with a Flight error and the service keeps serving. No python3 or package index: the pyarrow
// test is skipped, saying which. Every wait is bounded; children are killed at the end.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { status } from '@grpc/grpc-js';
import { Binary, makeData, makeVector, Table, tableFromIPC, tableToIPC, Utf8, vectorFromArray } from 'apache-arrow';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import { encodeFlightData } from '../../ingest/flight/flight-messages.ts';
import { flightFailure } from '../../ingest/flight/status-map.ts';
import { flightDataOf, FlightTestClient, ipcMessages, timersDescriptor } from '../../ingest/flight/flight-client.ts';
import { pyarrowFlightPython, run } from '../helpers/python-venv.ts';
import { skipOrFail } from '../helpers/tools.ts';
import { testScratch } from '../helpers/scratch.ts';
import { flightUrl, startService } from '../helpers/service.ts';
import { startH2Sink } from '../helpers/sinks.ts';
import { withTimeout } from '../helpers/timeout.ts';

const clientScript = fileURLToPath(new URL('../fixtures/pyarrow_flight_client.py', import.meta.url));
const scratch = testScratch('fermata-flight');
const installTimeoutMs = 10 * 60_000;
const scriptTimeoutMs = 5 * 60_000;
const requestTimeoutMs = 10_000;
const token = 'flight-test-token-0123456789';
const dayMs = 86_400_000;


async function getJson(base: string, path: string, bearer?: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${base}${path}`, { headers: bearer === undefined ? {} : { authorization: `Bearer ${bearer}` }, signal: AbortSignal.timeout(requestTimeoutMs) });
  return { status: response.status, body: JSON.parse(await response.text()) };
}

interface Raised {
  readonly raised: string | null;
  readonly message?: string;
}

interface Summary {
  readonly pyarrow: string;
  readonly million: { rows: number; batches: number; put_results: number; ids: number; distinct_ids: number; duplicates: number; seconds: number; sample: Array<{ id: string; fire_at_ms: number; key: string }> };
  readonly counts: { results: Array<{ accepted: number; duplicates: number; first_id: string }>; first_id: string };
  readonly due: { ids: string[]; put_results: number };
  readonly bad_column: Raised;
  readonly bad_descriptor: Raised;
  readonly do_get: Raised;
  readonly flights: Array<{ path: string[]; records: number; schema: string[] }>;
  readonly flight_info: { path: string[] };
  readonly unknown_queue: Raised;
  readonly no_token: Raised;
  readonly wrong_token: Raised;
}

test('pyarrow.flight: DoPut of 1,000,000 rows, byte-exact payloads, refusals as Flight errors, ListFlights, bearer tokens', { timeout: installTimeoutMs + 10 * 60_000 }, async (t) => {
  const venv = await pyarrowFlightPython(installTimeoutMs);
  if ('skip' in venv) return skipOrFail(t, venv.skip);
  const sink = await startH2Sink();
  try {
    const service = await startService(scratch.tempDir('pyarrow'), (child) => scratch.children.add(child), { args: ['--flight', '127.0.0.1:0'], env: { FERMATA_TOKENS: token } });
    const url = await flightUrl(service);
    const script = await run(venv.python, [clientScript, url, sink.url, token], scriptTimeoutMs, 'pyarrow_flight_client.py');
    assert.equal(script.code, 0, `pyarrow_flight_client.py exited ${script.code ?? script.signal}:\n${script.stderr}`);
    const summary = JSON.parse(script.stdout.trim().split('\n').at(-1) ?? '') as Summary;
    const { million } = summary;
    t.diagnostic(`pyarrow ${summary.pyarrow}: ${million.rows} rows in ${million.batches} batches by DoPut in ${million.seconds.toFixed(2)} s`);

    // One PutResult per record batch, an id per row, every row new.
    assert.equal(million.put_results, million.batches);
    assert.equal(million.ids, 1_000_000);
    assert.equal(million.distinct_ids, 1_000_000);
    assert.equal(million.duplicates, 0);
    assert.ok(million.sample.length >= 300);
    const stats = await getJson(service.url, '/v1/stats', token);
    assert.ok((stats.body as { pending: number }).pending >= 1_000_000, JSON.stringify(stats.body));
    for (const row of million.sample) {
      const { status: code, body } = await getJson(service.url, `/v1/timers/${row.id}`, token);
      assert.equal(code, 200, `GET ${row.id}: ${JSON.stringify(body)}`);
      const view = body as { state: string; fire_at: string; key: string; queue: string };
      assert.deepEqual({ state: view.state, fire_at: view.fire_at, key: view.key, queue: view.queue }, { state: 'pending', fire_at: new Date(row.fire_at_ms).toISOString(), key: row.key, queue: 'default' });
    }

    // Without the ids header, each PutResult is JSON: the first 600 rows again are duplicates of the million's first rows (their keys).
    assert.deepEqual(summary.counts.results, [
      { accepted: 600, duplicates: 600, first_id: summary.counts.first_id },
      { accepted: 600, duplicates: 600, first_id: summary.counts.first_id },
    ]);

    // The due rows went to the queue the descriptor named and reached the sink byte for byte.
    assert.equal(summary.due.put_results, 1);
    assert.equal(summary.due.ids.length, 256);
    await withTimeout(
      (async () => {
        while (sink.requests.filter((request) => request.path.startsWith('/due/')).length < 256) await new Promise((resolve) => setTimeout(resolve, 25));
      })(),
      30_000,
      'the 256 due timers to reach the sink',
    );
    for (let i = 0; i < 256; i++) {
      const [request] = sink.to(`/due/${i}`);
      assert.ok(request !== undefined, `timer ${i} delivered`);
      assert.deepEqual(request.body, Buffer.from(Array.from({ length: 256 }, (_, j) => (i + j) % 256)), `payload ${i} byte for byte`);
    }
    const dueView = await getJson(service.url, `/v1/timers/${summary.due.ids[0]}`, token);
    assert.equal((dueView.body as { queue: string }).queue, 'flight-sink');

    // Refusals are Flight errors with the words that say why.
    assert.equal(summary.bad_column.raised, 'ArrowInvalid', JSON.stringify(summary.bad_column));
    assert.match(summary.bad_column.message ?? '', /BATCH_INVALID: fire_at must be Timestamp or Int64/);
    assert.equal(summary.bad_descriptor.raised, 'ArrowInvalid');
    assert.match(summary.bad_descriptor.message ?? '', /descriptor must be a PATH \["timers"\]/);
    assert.equal(summary.do_get.raised, 'ArrowInvalid', JSON.stringify(summary.do_get));
    assert.match(summary.do_get.message ?? '', /QUEUE_NOT_PULL: queue "flight-sink" has "delivery": "request"/);
    assert.equal(summary.unknown_queue.raised, 'ArrowKeyError', JSON.stringify(summary.unknown_queue));
    assert.equal(summary.no_token.raised, 'FlightUnauthenticatedError', JSON.stringify(summary.no_token));
    assert.equal(summary.wrong_token.raised, 'FlightUnauthenticatedError', JSON.stringify(summary.wrong_token));

    // The queues as flights, each with the DoPut schema.
    assert.deepEqual(summary.flights.map((flight) => flight.path), [['timers', 'default'], ['timers', 'flight-sink']]);
    for (const flight of summary.flights) assert.deepEqual(flight.schema, ['fire_at', 'target', 'payload', 'headers', 'key', 'queue']);
    assert.deepEqual(summary.flight_info.path, ['timers', 'flight-sink']);
  } finally {
    await sink.close();
  }
});

/** An IPC stream of `rows` timers a day ahead: fire_at Int64 ms, target, payload (and queue, when given). */
function timersIpc(rows: number, queue?: string): Uint8Array {
  const base = Date.now() + dayMs;
  const payloads = Array.from({ length: rows }, (_, i) => Buffer.from(`payload ${i}\u0000\u00ff`, 'latin1'));
  const offsets = new Int32Array(rows + 1);
  payloads.forEach((payload, i) => (offsets[i + 1] = (offsets[i] as number) + payload.length));
  return tableToIPC(
    new Table({
      fire_at: makeVector(BigInt64Array.from({ length: rows }, (_, i) => BigInt(base + i))),
      target: vectorFromArray(Array.from({ length: rows }, () => 'https://hooks.example.com/fire'), new Utf8()),
      payload: makeVector(makeData({ type: new Binary(), length: rows, valueOffsets: offsets, data: Buffer.concat(payloads) })),
      ...(queue === undefined ? {} : { queue: vectorFromArray(Array.from({ length: rows }, (_, i) => (i === rows - 1 ? 'other' : queue)), new Utf8()) }),
    }),
    'stream',
  );
}

/** The ids of a PutResult's app_metadata (an Arrow stream of id, duplicate). */
function idsOf(metadata: Buffer): string[] {
  return [...(tableFromIPC(metadata).getChild('id') ?? [])] as string[];
}

test('malformed DoPut streams get Flight errors and the service keeps serving; a queue descriptor fills the queue column', { timeout: 120_000 }, async () => {
  const service = await startService(scratch.tempDir('malformed'), (child) => scratch.children.add(child), { args: ['--flight', '127.0.0.1:0'] });
  const client = new FlightTestClient(await flightUrl(service), { ids: true });
  try {
    const [schema, batch] = ipcMessages(timersIpc(3)) as [{ header: Buffer; body: Buffer }, { header: Buffer; body: Buffer }];
    const first = (header: Buffer, body: Buffer = Buffer.alloc(0)): Buffer => encodeFlightData({ descriptor: timersDescriptor(), dataHeader: header, dataBody: body });
    const next = (header: Buffer, body: Buffer): Buffer => encodeFlightData({ dataHeader: header, dataBody: body });
    const cases: Array<[string, Buffer[], RegExp]> = [
      ['not protobuf', [Buffer.from([0xff, 0xff, 0xff])], /malformed Flight message/],
      ['no descriptor', [next(schema.header, schema.body)], /descriptor must be a PATH/],
      ['a header that is not a flatbuffer', [first(Buffer.from('not a flatbuffer at all, really'))], /malformed Flight stream/],
      ['a record batch before the schema', [first(batch.header, batch.body)], /must be the schema/],
      ['a body shorter than announced', [first(schema.header), next(batch.header, batch.body.subarray(0, 8))], /announces a body of/],
      ['two schemas', [first(schema.header), next(schema.header, schema.body)], /a second schema/],
    ];
    for (const [what, messages, expected] of cases) {
      const outcome = await withTimeout(client.doPut(messages), 10_000, what);
      assert.equal(outcome.error?.code, status.INVALID_ARGUMENT, `${what}: ${outcome.error?.message}`);
      assert.match(outcome.error?.details ?? '', expected, what);
      assert.equal(outcome.results.length, 0, what);
    }

    // A good batch, then a forged one: the good one's PutResult comes first, then the error.
    const goodThenBad = await withTimeout(client.doPut([first(schema.header), next(batch.header, batch.body), next(Buffer.from('garbage header'), batch.body)]), 10_000, 'good then bad');
    assert.equal(goodThenBad.results.length, 1, 'the PutResult of the durable batch before the refused message');
    assert.equal(goodThenBad.error?.code, status.INVALID_ARGUMENT);
    assert.match(goodThenBad.error?.details ?? '', /^BATCH_INVALID: malformed Flight stream: .* \(record batch 1 of the stream\)$/);

    // Mutated record batch headers (bytes flipped at random, seeded): each call ends with a status; none crashes the service.
    let seed = 20_261_203;
    const random = (): number => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    let refused = 0;
    for (let round = 0; round < 200; round++) {
      const header = Buffer.from(batch.header);
      for (let flips = 1 + Math.floor(random() * 4); flips > 0; flips--) header[Math.floor(random() * header.length)] = Math.floor(random() * 256);
      const outcome = await withTimeout(client.doPut([first(schema.header), next(header, batch.body)]), 10_000, `mutation ${round}`);
      if (outcome.error !== undefined) {
        refused++;
        assert.ok(outcome.error.code === status.INVALID_ARGUMENT, `mutation ${round}: ${outcome.error.code} ${outcome.error.details}`);
      }
    }
    assert.ok(refused > 0, 'some mutations are refused');
    assert.equal((await getJson(service.url, '/healthz')).status, 200);
    assert.equal(service.child.exitCode, null, 'the service is still running');

    // ["timers", QUEUE] with no queue column: every row lands in QUEUE.
    const put = await client.doPut(flightDataOf(timersDescriptor('from-flight'), [timersIpc(3)]));
    assert.equal(put.error, undefined, put.error?.details);
    assert.equal(put.results.length, 1);
    const ids = idsOf(put.results[0] as Buffer);
    assert.equal(ids.length, 3);
    for (const id of ids) assert.equal(((await getJson(service.url, `/v1/timers/${id}`)).body as { queue: string }).queue, 'from-flight');

    // A queue column that disagrees with the descriptor: refused, naming the column and row.
    const mismatch = await client.doPut(flightDataOf(timersDescriptor('from-flight'), [timersIpc(3, 'from-flight')]));
    assert.equal(mismatch.error?.code, status.INVALID_ARGUMENT);
    assert.match(mismatch.error?.details ?? '', /queue is "other" in row 2/);
    assert.equal(mismatch.error?.metadata.get('fermata-column')[0], 'queue');
    assert.equal(mismatch.error?.metadata.get('fermata-row')[0], '2');
  } finally {
    client.close();
    service.child.kill('SIGTERM');
    await withTimeout(service.exited, 30_000, 'the service to stop');
  }
  assert.equal(service.child.exitCode, 0, service.output());
});

test('engine conditions map to Flight status codes: overload RESOURCE_EXHAUSTED, a poisoned log UNAVAILABLE, a bad row INVALID_ARGUMENT', () => {
  const overload = flightFailure(new FermataError(errorCodes.walQueueFull, 'the log queue is full'), 3);
  assert.equal(overload.code, status.RESOURCE_EXHAUSTED);
  assert.match(overload.details, /^WAL_QUEUE_FULL: the log queue is full \(record batch 3 of the stream\) \(retry in 1 s\)$/);
  assert.equal(flightFailure(new FermataError(errorCodes.capacityFull, 'full')).code, status.RESOURCE_EXHAUSTED);
  assert.equal(flightFailure(new FermataError(errorCodes.walPoisoned, 'fsync failed')).code, status.UNAVAILABLE);
  assert.equal(flightFailure(new FermataError(errorCodes.walClosed, 'stopping')).code, status.UNAVAILABLE);
  assert.equal(flightFailure(new FermataError(errorCodes.unauthorized, 'no token')).code, status.UNAUTHENTICATED);
  const bad = flightFailure(new FermataError(errorCodes.batchInvalid, 'target is null in row 7', { column: 'target', row: 7 }), 0);
  assert.equal(bad.code, status.INVALID_ARGUMENT);
  assert.deepEqual([bad.metadata.get('fermata-code'), bad.metadata.get('fermata-column'), bad.metadata.get('fermata-row'), bad.metadata.get('fermata-batch')], [['BATCH_INVALID'], ['target'], ['7'], ['0']]);
  const bug = flightFailure(new TypeError('x is undefined'));
  assert.equal(bug.code, status.INTERNAL);
  assert.equal(bug.unexpected, true);
  assert.doesNotMatch(bug.details, /x is undefined/, 'the text of a bug stays on the server');
});
