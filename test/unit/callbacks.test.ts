// Callbacks (engine/callbacks.ts, docs/format/engine-records.md "ADD (1)" encoding 3 and
// "OUTCOME_FOLLOWED (11)"): the fields in the batch codec (old encoding-2 bodies still decode),
// the store and the timer view across a restart; the follow-up timer a final outcome makes, in
// the same record, replayed the same; none for a retry, a cancel, or a follow-up's own outcome;
// refusals naming the field; and power loss at any point of settling keeps a final outcome and
// its follow-up together.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Table, tableFromArrays, tableToIPC, Utf8, vectorFromArray } from 'apache-arrow';
import { decodeBatch, encodeBatch } from '../../engine/batch/batch-codec.ts';
import { batchFromSpecs, bytesAt, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { type ErrorCode, isFermataError } from '../../engine/errors.ts';
import { encodeTimerId } from '../../engine/ids.ts';
import { decodeOutcomeFollowed, emptyOutcomes, encodeAddHeader, encodeOutcomeFollowed, outcomeKind, addEncodingColumns } from '../../engine/records.ts';
import { outcomesFor } from '../helpers/outcomes.ts';
import { Prng } from '../helpers/prng.ts';
import { batchFromNdjson } from '../../ingest/http/body/json-batch.ts';
import { callbackBytesOf, failureCallbackBytesOf, urlOrNull } from '../../engine/store/callback-bytes.ts';
import { ResidentStore } from '../../engine/store/resident-store.ts';
import { withPowerLossAt } from '../sim/power-loss-at.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const t0 = 1_796_220_000_000;
const utf8 = new TextDecoder();

function manualClock(start = t0): Clock & { set(ms: number): void } {
  let now = start;
  return { now: () => now, set: (ms) => (now = ms) };
}

const hex = (parts: readonly Uint8Array[]): string => Buffer.concat(parts).toString('hex');

const timer = (extra: Partial<TimerSpec> = {}): TimerSpec => ({ fireAtMs: t0, target: 'https://a.example/hook', queue: 'q', ...extra });

test('ADD encoding 3: the callback columns follow the keys; a batch without them stays encoding 2 byte for byte', () => {
  const plain = batchFromSpecs([timer()]);
  assert.equal(plain.callback, undefined, 'no callback columns when no row has one');
  const plainBytes = Uint8Array.from(Buffer.concat(encodeBatch(plain)));
  // Encoding 2 as written before callbacks existed: rows, targets, queues, fire_at, indexes, three empty-ish columns.
  assert.equal(decodeBatch(plainBytes).callback, undefined);
  const withCallbacks = batchFromSpecs([timer({ callback: 'https://cb.example/ok' }), timer({ failureCallback: 'https://cb.example/dead' })]);
  const encoded = Uint8Array.from(Buffer.concat(encodeBatch(withCallbacks)));
  assert.throws(() => decodeBatch(encoded), /bytes after the batch/, 'encoding 2 refuses the extra columns');
  const decoded = decodeBatch(encoded, true);
  assert.ok(decoded.callback !== undefined && decoded.failureCallback !== undefined);
  assert.equal(utf8.decode(bytesAt(decoded.callback, 0)), 'https://cb.example/ok');
  assert.equal(bytesAt(decoded.callback, 1).length, 0);
  assert.equal(utf8.decode(bytesAt(decoded.failureCallback, 1)), 'https://cb.example/dead');
  // The tail of the body: callback offsets [0, 21, 21] and bytes, failure offsets [0, 0, 23] and bytes.
  const tail = Buffer.concat([
    Buffer.from('00000000' + '15000000' + '15000000', 'hex'),
    Buffer.from('https://cb.example/ok'),
    Buffer.from('00000000' + '00000000' + '17000000', 'hex'),
    Buffer.from('https://cb.example/dead'),
  ]);
  assert.equal(Buffer.from(encoded.subarray(encoded.length - tail.length)).toString('hex'), tail.toString('hex'));
});

// The worked example of docs/format/engine-records.md, "OUTCOME_FOLLOWED (11)": the fixed parts
// in hex, the summary, headers and key as the text they are.
const followedId = '000000000w000001mcc5rk0r';
const followedSummary = `{"id":"${followedId}","state":"delivered","attempts":1,"status":200,"error":null,"response_base64":"b2s=","fire_at":"2027-01-15T07:59:59.000Z","delivered_at":"2027-01-15T08:00:00.000Z"}`;
const followedHeaders = `{"content-type":"application/json","fermata-callback-for":"${followedId}"}`;
const followedGolden = Buffer.concat([
  Buffer.from(
    `38 00 00 00 00 00 00 00  01 00 00 00 00 00 00 00
     00 00 00 00 00 00 1c 40  00 00 00 00 01 00 c8 00  01 00 00 00 00 00 00 00  00 00 c0 2a d8 31 7a 42
     00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
     01 02 00 00 01 00 00 00  00 00 00 c5 85 31 7a 42  00 00 00 c5 85 31 7a 42
     01 00 00 00  01 00 00 00 14 00 00 00`.replace(/\s+/g, ''),
    'hex',
  ),
  Buffer.from('https://r.example/cb'),
  Buffer.from('01000000 07000000'.replace(/\s+/g, ''), 'hex'),
  Buffer.from('default'),
  Buffer.from('000000c585317a42 00000000 00000000 00000000 c4000000'.replace(/\s+/g, ''), 'hex'),
  Buffer.from(followedSummary),
  Buffer.from('00000000 55000000'.replace(/\s+/g, ''), 'hex'),
  Buffer.from(followedHeaders),
  Buffer.from('00000000 21000000'.replace(/\s+/g, ''), 'hex'),
  Buffer.from(`callback:${followedId}`),
]);

test('OUTCOME_FOLLOWED: the worked example is written byte for byte, and an engine makes this follow-up from this outcome', async () => {
  const outcomes = emptyOutcomes(1);
  outcomes.count = 1;
  outcomes.seqs[0] = 7;
  outcomes.kinds[0] = outcomeKind.delivered;
  outcomes.statuses[0] = 200;
  outcomes.attempts[0] = 1;
  outcomes.retryAtMs[0] = 1_800_086_400_000;
  assert.equal(encodeTimerId(7, 0, 1_799_999_999_000), followedId);
  const settledAt = 1_800_000_000_000;
  const followUp = batchFromSpecs([{ fireAtMs: settledAt, target: 'https://r.example/cb', payload: followedSummary, headers: { 'content-type': 'application/json', 'fermata-callback-for': followedId }, key: `callback:${followedId}`, queue: 'default' }]);
  const body = Buffer.concat(encodeOutcomeFollowed(outcomes, [encodeAddHeader(addEncodingColumns, 1, settledAt, settledAt), ...encodeBatch(followUp)]));
  assert.equal(body.length, 489);
  assert.equal(body.toString('hex'), followedGolden.toString('hex'));
  const decoded = decodeOutcomeFollowed(Uint8Array.from(followedGolden));
  assert.deepEqual([decoded?.outcomes.count, decoded?.outcomes.kinds[0], decoded?.outcomes.statuses[0]], [1, outcomeKind.delivered, 200]);

  // The engine, given that timer and that outcome, logs this record: the same follow-up, byte for byte.
  const clock = manualClock(1_799_999_999_000 - 1000);
  const fs = new SimFileSystem({ seed: 53 });
  const engine = await Engine.open({ dataDir, fs, clock });
  for (let seq = engine.log.lastSeq; seq < 6; seq = engine.log.lastSeq) await engine.setQueue('filler', { max_attempts: 1 + seq });
  const admitted = await engine.admit(batchFromSpecs([{ fireAtMs: 1_799_999_999_000, target: 'https://a.example/hook', callback: 'https://r.example/cb' }]));
  assert.equal(admitted.idOf(0), followedId);
  clock.set(1_799_999_999_000);
  const slice = engine.takeDue(1_799_999_999_000, 1);
  clock.set(settledAt);
  const delivered = outcomesFor(slice, outcomeKind.delivered);
  delivered.attempts[0] = 1;
  await engine.settle(delivered, [new TextEncoder().encode('ok')]);
  const follow = engine.takeDue(settledAt, 1);
  const delivery = engine.deliveryOf(follow.seqs[0] as number, follow.rows[0] as number);
  assert.equal(utf8.decode(delivery?.bytes.subarray(0, delivery.payloadLength)), followedSummary);
  await engine.close();
});

test('OUTCOME_FOLLOWED: outcome bytes, reserved, the OUTCOME_DETAILED body, then the ADD body; malformed ones refused', () => {
  const outcomes = emptyOutcomes(1);
  outcomes.count = 1;
  outcomes.seqs[0] = 7;
  outcomes.rows[0] = 0;
  outcomes.kinds[0] = outcomeKind.delivered;
  outcomes.statuses[0] = 200;
  outcomes.attempts[0] = 1;
  outcomes.retryAtMs[0] = 1_800_086_400_000;
  const add = [encodeAddHeader(addEncodingColumns, 1, t0, t0), ...encodeBatch(batchFromSpecs([timer({ key: 'callback:x' })]))];
  const body = Buffer.concat(encodeOutcomeFollowed(outcomes, add));
  // 8 (entries, texts) + 32 (the entry) + 16 (its detail): 56 = 0x38 bytes of outcomes.
  assert.equal(body.subarray(0, 8).toString('hex'), '3800000000000000');
  assert.equal(body.subarray(8, 16).toString('hex'), '0100000000000000', 'one entry, no texts');
  assert.equal(body.subarray(8 + 56).toString('hex'), hex(add));
  const decoded = decodeOutcomeFollowed(body);
  assert.equal(decoded?.outcomes.count, 1);
  assert.equal(Buffer.from(decoded?.add ?? []).toString('hex'), hex(add));
  assert.equal(decodeOutcomeFollowed(body.subarray(0, 7)), undefined, 'shorter than its header');
  const reserved = Buffer.from(body);
  reserved[4] = 1;
  assert.equal(decodeOutcomeFollowed(reserved), undefined, 'reserved not 0');
  const long = Buffer.from(body);
  long.writeUInt32LE(body.length, 0);
  assert.equal(decodeOutcomeFollowed(long), undefined, 'outcomes past the body');
});

test('callbacks are in the timer view, and stay there across a restart (the ADD record and the store)', async () => {
  const clock = manualClock();
  const fs = new SimFileSystem({ seed: 41 });
  let engine = await Engine.open({ dataDir, fs, clock });
  const admitted = await engine.admit(
    batchFromSpecs([timer({ callback: 'https://cb.example/ok', key: 'k1' }), timer({ failureCallback: 'https://cb.example/dead' }), timer()]),
  );
  const expect = (): void => {
    assert.deepEqual([engine.get(admitted.idOf(0))?.callback, engine.get(admitted.idOf(0))?.failureCallback, engine.get(admitted.idOf(0))?.key], ['https://cb.example/ok', null, 'k1']);
    assert.deepEqual([engine.get(admitted.idOf(1))?.callback, engine.get(admitted.idOf(1))?.failureCallback], [null, 'https://cb.example/dead']);
    assert.deepEqual([engine.get(admitted.idOf(2))?.callback, engine.get(admitted.idOf(2))?.failureCallback], [null, null]);
  };
  expect();
  await engine.close();
  engine = await Engine.open({ dataDir, fs, clock });
  expect();
  await engine.close();
});

test('bad callback URLs and callbacks on arrow and pull queues are refused naming the field', async () => {
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 43 }), clock: manualClock() });
  const refused = async (spec: TimerSpec, field: string, code = 'BATCH_INVALID'): Promise<void> => {
    await assert.rejects(engine.admit(batchFromSpecs([spec])), (err: unknown) => isFermataError(err, code as ErrorCode) && (err as { details?: { column?: string } }).details?.column === field);
  };
  await refused(timer({ callback: 'ftp://cb.example/x' }), 'callback');
  await refused(timer({ failureCallback: 'not a url' }), 'failure_callback');
  await refused(timer({ callback: 'https://user:pw@cb.example/x' }), 'callback');
  await engine.setQueue('batched', { delivery: 'arrow', sink: 'https://sink.example/in' });
  await engine.setQueue('pulled', { delivery: 'pull' });
  await refused(timer({ queue: 'batched', callback: 'https://cb.example/ok' }), 'callback');
  await refused(timer({ queue: 'pulled', failureCallback: 'https://cb.example/dead' }), 'failure_callback');
  await engine.close();
});

test('a delivered timer makes its callback and a dead one its failure callback, in the outcome record; replay makes them the same', async () => {
  const clock = manualClock();
  const fs = new SimFileSystem({ seed: 47 });
  let engine = await Engine.open({ dataDir, fs, clock });
  const admitted = await engine.admit(
    batchFromSpecs([
      timer({ callback: 'https://cb.example/ok', failureCallback: 'https://cb.example/dead' }),
      timer({ callback: 'https://cb.example/ok', failureCallback: 'https://cb.example/dead' }),
      timer({ failureCallback: 'https://cb.example/dead' }), // delivered: no callback to make
      timer({ callback: 'https://cb.example/ok' }), // cancelled: none
    ]),
  );
  assert.equal(await engine.cancel(admitted.idOf(3)), 'cancelled');
  const slice = engine.takeDue(t0, 10);
  assert.equal(slice.count, 3);
  const outcomes = outcomesFor(slice, outcomeKind.delivered);
  outcomes.kinds[1] = outcomeKind.dead;
  outcomes.statuses[1] = 410;
  outcomes.attempts.fill(1);
  clock.set(t0 + 5);
  await engine.settle(outcomes, [new TextEncoder().encode('thanks'), undefined, undefined]);
  const followUps = engine.takeDue(t0 + 5, 10);
  assert.equal(followUps.count, 2, 'one callback, one failure callback');
  const targets = [0, 1].map((i) => engine.deliveryOf(followUps.seqs[i] as number, followUps.rows[i] as number)?.target);
  assert.deepEqual(targets.sort(), ['https://cb.example/dead', 'https://cb.example/ok']);
  for (let i = 0; i < 2; i++) {
    const view = engine.get(encodeTimerId(followUps.seqs[i] as number, followUps.rows[i] as number, followUps.fireAtMs[i] as number));
    assert.ok(view?.key?.startsWith('callback:') === true, 'keyed by the original id');
    assert.deepEqual([view?.callback, view?.failureCallback, view?.queue], [null, null, 'q'], 'no callback of its own, same queue');
    assert.equal(view?.createdAtMs, t0 + 5, 'created when the outcome that made it was settled');
  }
  const summaries = [0, 1].map((i) => {
    const delivery = engine.deliveryOf(followUps.seqs[i] as number, followUps.rows[i] as number);
    assert.ok(delivery !== undefined);
    return { target: delivery.target, body: JSON.parse(utf8.decode(delivery.bytes.subarray(0, delivery.payloadLength))) as Record<string, unknown>, headers: JSON.parse(utf8.decode(delivery.bytes.subarray(delivery.payloadLength, delivery.payloadLength + delivery.headersLength))) as Record<string, string> };
  });
  const ok = summaries.find((s) => s.target.endsWith('/ok'));
  const dead = summaries.find((s) => s.target.endsWith('/dead'));
  assert.deepEqual(ok?.body, { id: admitted.idOf(0), state: 'delivered', attempts: 1, status: 200, error: null, response_base64: Buffer.from('thanks').toString('base64'), fire_at: new Date(t0).toISOString(), delivered_at: new Date(t0 + 5).toISOString() });
  assert.deepEqual(dead?.body, { id: admitted.idOf(1), state: 'dead', attempts: 1, status: 410, error: null, response_base64: null, fire_at: new Date(t0).toISOString(), delivered_at: null });
  assert.equal(ok?.headers['fermata-callback-for'], admitted.idOf(0));
  // The follow-ups' ids and keys, then the same after a restart (replay of the one record).
  const followUpIds = [0, 1].map((i) => ({ seq: followUps.seqs[i] as number, row: followUps.rows[i] as number }));
  await engine.close();
  engine = await Engine.open({ dataDir, fs, clock });
  assert.equal(engine.get(admitted.idOf(0))?.state, 'delivered');
  assert.equal(engine.get(admitted.idOf(1))?.state, 'dead');
  const again = engine.takeDue(t0 + 5, 10);
  assert.deepEqual(
    Array.from({ length: again.count }, (_, i) => ({ seq: again.seqs[i] as number, row: again.rows[i] as number })),
    followUpIds,
    'replay made the same follow-ups under the same ids',
  );
  for (let i = 0; i < again.count; i++) assert.equal(engine.get(encodeTimerId(again.seqs[i] as number, again.rows[i] as number, again.fireAtMs[i] as number))?.createdAtMs, t0 + 5, 'replayed: the same created_at');
  // A follow-up's own outcome (dead here) makes no further callback.
  const deadAgain = outcomesFor(again, outcomeKind.dead, 0, 500);
  deadAgain.attempts.fill(1);
  await engine.settle(deadAgain);
  assert.equal(engine.takeDue(t0 + 10_000, 10).count, 0, 'no callback of a callback');
  await engine.close();
});

test('power loss during outcomes with callbacks: a timer is final after recovery exactly when its follow-up is there, and acknowledged ones are both', { timeout: 300_000 }, async () => {
  for (let seed = 1; seed <= 150; seed++) {
    const prng = new Prng(seed);
    const fs = new SimFileSystem({ seed });
    const clock = manualClock();
    const setup = await Engine.open({ dataDir, fs, clock });
    const admitted = await setup.admit(
      batchFromSpecs(Array.from({ length: 12 }, (_, i) => timer({ fireAtMs: t0 + i, callback: 'https://cb.example/ok', failureCallback: 'https://cb.example/dead' }))),
    );
    await setup.close();
    const settled = new Map<string, string>();
    // The cut can come during open itself (withPowerLossAt drops the errors after it).
    const image = await withPowerLossAt(fs, fs.opCount + 4 + prng.below(40), async () => {
      const engine = await Engine.open({ dataDir, fs, clock });
      const work: Array<Promise<void>> = [];
      for (let round = 0; round < 4; round++) {
        const slice = engine.takeDue(t0 + 100, 3);
        const outcomes = outcomesFor(slice, outcomeKind.delivered, t0 + 10_000);
        const expected: Array<[string, string]> = [];
        for (let i = 0; i < slice.count; i++) {
          const kind = [outcomeKind.delivered, outcomeKind.retry, outcomeKind.dead][prng.below(3)] as number;
          outcomes.kinds[i] = kind;
          outcomes.attempts[i] = 1;
          expected.push([admitted.idOf(slice.rows[i] as number), kind === outcomeKind.delivered ? 'delivered' : kind === outcomeKind.retry ? 'retrying' : 'dead']);
        }
        work.push(engine.settle(outcomes).then(() => void expected.forEach(([id, state]) => settled.set(id, state))));
      }
      await Promise.allSettled(work);
      await engine.close().catch(() => undefined);
    });
    const recovered = await Engine.open({ dataDir, fs: image, clock });
    for (const [id, state] of settled) assert.equal(recovered.get(id)?.state, state, `seed ${seed}: acknowledged outcome of ${id} lost`);
    // Every follow-up there is, by the id it reports on: one each, and its state.
    const reported = new Map<string, string>();
    const due = recovered.takeDue(t0 + 1_000_000, 1000);
    for (let i = 0; i < due.count; i++) {
      if (due.seqs[i] === admitted.seq) continue;
      const delivery = recovered.deliveryOf(due.seqs[i] as number, due.rows[i] as number);
      assert.ok(delivery !== undefined);
      const summary = JSON.parse(utf8.decode(delivery.bytes.subarray(0, delivery.payloadLength))) as { id: string; state: string };
      assert.ok(!reported.has(summary.id), `seed ${seed}: two follow-ups for ${summary.id}`);
      assert.equal(delivery.target, summary.state === 'delivered' ? 'https://cb.example/ok' : 'https://cb.example/dead');
      reported.set(summary.id, summary.state);
    }
    for (let row = 0; row < 12; row++) {
      const id = admitted.idOf(row);
      const state = recovered.get(id)?.state;
      const final = state === 'delivered' || state === 'dead';
      assert.equal(reported.get(id), final ? state : undefined, `seed ${seed}: timer ${row} is ${state}, its follow-up ${reported.get(id)}`);
    }
    await recovered.close();
  }
});

test('NDJSON and Arrow batches carry callbacks (Arrow as nullable Utf8 columns), kept across a restart; a batch without them has no callback columns', async () => {
  const ndjson = batchFromNdjson(
    new TextEncoder().encode(
      [
        JSON.stringify({ fire_at: t0, target: 'https://a.example/1', callback: 'https://cb.example/1' }),
        JSON.stringify({ fire_at: t0, target: 'https://a.example/2' }),
        JSON.stringify({ fire_at: t0, target: 'https://a.example/3', failure_callback: 'https://cb.example/3' }),
      ].join('\n'),
    ),
    t0,
  ).batch;
  assert.deepEqual([0, 1, 2].map((row) => utf8.decode(bytesAt(ndjson.callback ?? ndjson.keys, row))), ['https://cb.example/1', '', '']);
  assert.deepEqual([0, 1, 2].map((row) => utf8.decode(bytesAt(ndjson.failureCallback ?? ndjson.keys, row))), ['', '', 'https://cb.example/3']);
  assert.equal(batchFromNdjson(new TextEncoder().encode(JSON.stringify({ fire_at: t0, target: 'https://a.example/1' })), t0).batch.callback, undefined);
  assert.throws(() => batchFromNdjson(new TextEncoder().encode(JSON.stringify({ fire_at: t0, target: 'https://a.example/1', callback: '' })), t0), /callback must not be empty/);

  const ipc = tableToIPC(
    tableFromArrays({
      fire_at: BigInt64Array.of(BigInt(t0), BigInt(t0)),
      target: vectorFromArray(['https://a.example/1', 'https://a.example/2'], new Utf8()),
      callback: vectorFromArray(['https://cb.example/arrow', null], new Utf8()),
      failure_callback: vectorFromArray([null, 'https://cb.example/arrow-dead'], new Utf8()),
    } as never) as unknown as Table,
    'stream',
  );
  const clock = manualClock();
  const fs = new SimFileSystem({ seed: 59 });
  let engine = await Engine.open({ dataDir, fs, clock });
  const admitted = await engine.admitArrow(ipc);
  const ndjsonAdmitted = await engine.admit(ndjson);
  const expect = (): void => {
    assert.deepEqual([engine.get(admitted.idOf(0))?.callback, engine.get(admitted.idOf(0))?.failureCallback], ['https://cb.example/arrow', null]);
    assert.deepEqual([engine.get(admitted.idOf(1))?.callback, engine.get(admitted.idOf(1))?.failureCallback], [null, 'https://cb.example/arrow-dead']);
    assert.deepEqual([engine.get(ndjsonAdmitted.idOf(2))?.callback, engine.get(ndjsonAdmitted.idOf(2))?.failureCallback], [null, 'https://cb.example/3']);
  };
  expect();
  await engine.close();
  engine = await Engine.open({ dataDir, fs, clock });
  expect();
  await engine.close();
});

test('the summary names the error only beside a status that did not come back', async () => {
  const clock = manualClock();
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 61 }), clock });
  const admitted = await engine.admit(batchFromSpecs([timer({ failureCallback: 'https://cb.example/a' }), timer({ failureCallback: 'https://cb.example/b' })]));
  const slice = engine.takeDue(t0, 10);
  const outcomes = outcomesFor(slice, outcomeKind.dead, 0, 503);
  outcomes.attempts.fill(20);
  outcomes.errorTexts.push('HTTP 503', 'timeout after 10000 ms');
  outcomes.errors.set([1, 2]);
  outcomes.statuses[1] = 0;
  outcomes.attemptedAtMs.fill(t0);
  await engine.settle(outcomes);
  const due = engine.takeDue(t0, 10);
  const summaries = new Map<string, Record<string, unknown>>();
  for (let i = 0; i < due.count; i++) {
    const delivery = engine.deliveryOf(due.seqs[i] as number, due.rows[i] as number);
    assert.ok(delivery !== undefined);
    summaries.set(delivery.target, JSON.parse(utf8.decode(delivery.bytes.subarray(0, delivery.payloadLength))) as Record<string, unknown>);
  }
  assert.deepEqual([summaries.get('https://cb.example/a')?.id, summaries.get('https://cb.example/a')?.status, summaries.get('https://cb.example/a')?.error], [admitted.idOf(0), 503, null]);
  assert.deepEqual([summaries.get('https://cb.example/b')?.id, summaries.get('https://cb.example/b')?.status, summaries.get('https://cb.example/b')?.error], [admitted.idOf(1), null, 'timeout after 10000 ms']);
  await engine.close();
});

test('a queue set to arrow delivery after its timers were added makes no callbacks for them', async () => {
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 67 }), clock: manualClock() });
  await engine.admit(batchFromSpecs([timer({ callback: 'https://cb.example/ok' })]));
  await engine.setQueue('q', { delivery: 'arrow', sink: 'https://sink.example/in' });
  const slice = engine.takeDue(t0, 10);
  await engine.settle(outcomesFor(slice, outcomeKind.delivered));
  assert.equal(engine.takeDue(t0 + 1000, 10).count, 0, 'no follow-up bound for the sink');
  await engine.close();
});

test('the store keeps callbacks after the key under one bit of its length: keys, payloads and callbacks stay right through release, compaction and shrink', () => {
  const store = new ResidentStore({ capacityInitial: 4, arena: { slabBytes: 4096 } });
  const specs = Array.from({ length: 200 }, (_, i) =>
    timer({
      fireAtMs: t0 + i,
      payload: `p${i}`,
      ...(i % 3 === 0 ? { key: `k${i}` } : {}),
      ...(i % 2 === 0 ? { callback: `https://cb.example/${i}` } : {}),
      ...(i % 5 === 0 ? { failureCallback: `https://cb.example/dead/${i}` } : {}),
    }),
  );
  const batch = batchFromSpecs(specs);
  const target = store.internTarget('https://a.example/hook');
  const slots = new Int32Array(200);
  store.allocateRows(batch, 1, undefined, 200, [0], [target], slots);
  store.releaseTarget(target);
  const handles = Array.from(slots, (slot) => store.handleOf(slot));
  const check = (): void => {
    for (let i = 0; i < 200; i++) {
      const slot = store.slotOf(handles[i] as number);
      if (slot < 0) continue;
      const run = store.callbacksOf(slot);
      assert.equal(store.hasCallbacks(slot), i % 2 === 0 || i % 5 === 0, `row ${i}`);
      assert.equal(urlOrNull(callbackBytesOf(run)), i % 2 === 0 ? `https://cb.example/${i}` : null);
      assert.equal(urlOrNull(failureCallbackBytesOf(run)), i % 5 === 0 ? `https://cb.example/dead/${i}` : null);
      assert.equal(utf8.decode(store.keyOf(slot)), i % 3 === 0 ? `k${i}` : '');
      assert.equal(utf8.decode(store.payloadOf(slot)), `p${i}`);
    }
  };
  check();
  for (let i = 0; i < 200; i += 4) store.release(store.slotOf(handles[i] as number));
  assert.ok(store.compact(0.99) > 0, 'timers moved out of sparse slabs');
  check();
  const moves = store.shrink(store.shrinkCapacity(1.1, 4) ?? store.capacity);
  assert.ok(moves !== undefined);
  for (let i = 0; i < 200; i++) {
    const old = slots[i] as number;
    const moved = moves[old] as number;
    if (moved >= 0) handles[i] = store.handleOf(moved);
  }
  check();
});

test('a spilled timer keeps its callbacks on disk: shown from its run, promoted with them, and its delivery makes the callback, also after a restart', async () => {
  const hour = 3_600_000;
  const fs = new SimFileSystem({ seed: 71 });
  const clock = manualClock();
  let engine = await Engine.open({ dataDir, fs, clock });
  const admitted = await engine.admit(batchFromSpecs([0, 1, 2].map((i) => timer({ fireAtMs: t0 + 5 * hour + i, key: `far-${i}`, callback: `https://cb.example/far/${i}` }))));
  await engine.checkpoint(t0 + 2 * hour);
  assert.equal(engine.stats().spill.spilled, 3);
  await engine.close();
  engine = await Engine.open({ dataDir, fs, clock });
  assert.equal(engine.get(admitted.idOf(1)), undefined, 'not in memory');
  assert.equal((await engine.lookup(admitted.idOf(1)))?.callback, 'https://cb.example/far/1', 'read from its run');
  // Promoted ahead of the clock, as the memory loader does: a follow-up is due now, before the watermark.
  clock.set(t0 + 5 * hour + 100);
  assert.equal(await engine.promote(t0 + 6 * hour), 3);
  assert.deepEqual([engine.get(admitted.idOf(2))?.callback, engine.get(admitted.idOf(2))?.key], ['https://cb.example/far/2', 'far-2']);
  await engine.settle(outcomesFor(engine.takeDue(clock.now(), 1), outcomeKind.delivered));
  await engine.close();
  engine = await Engine.open({ dataDir, fs, clock });
  const followUps = engine.takeDue(clock.now(), 10);
  const targets = Array.from({ length: followUps.count }, (_, i) => engine.deliveryOf(followUps.seqs[i] as number, followUps.rows[i] as number)?.target);
  assert.deepEqual(targets.filter((target) => target?.startsWith('https://cb.example')), ['https://cb.example/far/0']);
  await engine.close();
});

test('a duplicate names callback and failure_callback among the fields that differ, for an original in memory and one on disk', async () => {
  const hour = 3_600_000;
  const fs = new SimFileSystem({ seed: 73 });
  const engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  const original = timer({ fireAtMs: t0 + 10 * hour, key: 'dup-1', callback: 'https://cb.example/ok', failureCallback: 'https://cb.example/dead' });
  await engine.admit(batchFromSpecs([original]));
  const differs = async (spec: TimerSpec): Promise<readonly string[] | undefined> => (await engine.admit(batchFromSpecs([spec]))).duplicateOf(0)?.differs;
  const { callback: _callback, failureCallback: _failure, ...withoutCallbacks } = original;
  for (const where of ['resident', 'spilled']) {
    assert.deepEqual(await differs(original), [], `${where}: an exact retry`);
    assert.deepEqual(await differs({ ...original, callback: 'https://cb.example/other' }), ['callback'], where);
    assert.deepEqual(await differs(withoutCallbacks), ['callback', 'failure_callback'], `${where}: left out is none`);
    if (where === 'resident') assert.equal((await engine.checkpoint(t0 + 2 * hour)).spilledRows, 1);
  }
  await engine.close();
});
