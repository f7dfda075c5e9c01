// Arrow IPC ⇄ TimerBatch: round trips, every accepted column type, errors that name the
// column and row, and the Arrow project's own malformed, foreign and compressed streams.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Binary, Dictionary, Int32, Int64, makeData, Message, makeVector, type Table, tableFromArrays, tableToIPC, Timestamp, TimeUnit, Utf8, vectorFromArray } from 'apache-arrow';
import { batchFromArrow } from '../../engine/batch/arrow-codec.ts';
import { batchFromSpecs, bytesAt, type TimerBatch } from '../../engine/batch/timer-batch.ts';
import { errorCodes, FermataError, isFermataError } from '../../engine/errors.ts';
import { arrowIpcTestData } from '../helpers/fixtures.ts';
import { batchToArrow } from '../helpers/arrow.ts';
import { Engine } from '../../engine/engine.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const testdata = fileURLToPath(arrowIpcTestData);
const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);

/** An Arrow IPC stream of the given columns (typed arrays or vectors). */
function ipcOf(columns: Record<string, unknown>): Uint8Array {
  return tableToIPC(tableFromArrays(columns as never) as unknown as Table, 'stream');
}

function rowsOf(batch: TimerBatch): object[] {
  return Array.from({ length: batch.rows }, (_, row) => ({
    fireAtMs: batch.fireAtMs[row],
    target: batch.targets[batch.targetIndex[row] as number],
    queue: batch.queues[batch.queueIndex[row] as number],
    payload: Array.from(bytesAt(batch.payload, row)),
    headers: text(bytesAt(batch.headers, row)),
    key: text(bytesAt(batch.keys, row)),
  }));
}

test('a batch written as a typical client writes it (Timestamp, dictionaries, Binary) reads back unchanged', () => {
  const batch = batchFromSpecs([
    { fireAtMs: 1_796_220_000_000, target: 'https://a.example/hook', payload: 'hello', key: 'k1' },
    { fireAtMs: 0, target: 'https://b.example/x', payload: Uint8Array.of(0, 255, 7), queue: 'billing', headers: { 'x-a': '1' } },
    { fireAtMs: 2 ** 47, target: 'https://a.example/hook' },
  ]);
  const back = batchFromArrow(batchToArrow(batch), 0);
  assert.deepEqual(rowsOf(back), rowsOf(batch));
  assert.deepEqual(back.targets, ['https://a.example/hook', 'https://b.example/x'], 'the dictionary survives');
});

test('fire_at as Timestamp of any unit (rounded up to the ms, never early) or Int64 ms; delay_ms from the accept time', () => {
  const cases: Array<[Timestamp | Int64, bigint, number]> = [
    [new Timestamp(TimeUnit.SECOND), 1_700_000_000n, 1_700_000_000_000],
    [new Timestamp(TimeUnit.MILLISECOND), 1_700_000_000_123n, 1_700_000_000_123],
    [new Timestamp(TimeUnit.MICROSECOND), 1_700_000_000_123_001n, 1_700_000_000_124],
    [new Timestamp(TimeUnit.NANOSECOND), 1_700_000_000_123_000_000n, 1_700_000_000_123],
    [new Int64(), 1_700_000_000_999n, 1_700_000_000_999],
  ];
  for (const [type, raw, expectedMs] of cases) {
    const ipc = ipcOf({
      fire_at: makeVector(makeData({ type, length: 1, data: BigInt64Array.of(raw) } as never)),
      target: vectorFromArray(['https://a.example/'], new Utf8()),
    });
    assert.equal(batchFromArrow(ipc, 0).fireAtMs[0], expectedMs, String(type));
  }
  const delays = ipcOf({ delay_ms: Int32Array.of(0, 1500), target: vectorFromArray(['u', 'v'], new Dictionary(new Utf8(), new Int32())) });
  assert.deepEqual(Array.from(batchFromArrow(delays, 1_000).fireAtMs), [1_000, 2_500]);
});

test('payload as Utf8 or Binary, nulls become empty, queue defaults to "default"', () => {
  const ipc = ipcOf({
    fire_at: makeVector(makeData({ type: new Int64(), length: 2, data: BigInt64Array.of(1n, 2n) } as never)),
    target: vectorFromArray(['t', 't'], new Utf8()),
    payload: vectorFromArray([Uint8Array.of(1, 2), null], new Binary()),
    queue: vectorFromArray([null, 'q'], new Utf8()),
  });
  const batch = batchFromArrow(ipc, 0);
  assert.deepEqual(rowsOf(batch).map((row) => [(row as { payload: number[] }).payload, (row as { queue: string }).queue]), [
    [[1, 2], 'default'],
    [[], 'q'],
  ]);
});

test('structural errors name the column, and the row where there is one', () => {
  const target = vectorFromArray(['t'], new Utf8());
  const fire = makeVector(makeData({ type: new Int64(), length: 1, data: BigInt64Array.of(1n) } as never));
  const expectations: Array<[Record<string, unknown>, string, RegExp]> = [
    [{ fire_at: fire, target, colour: vectorFromArray(['red'], new Utf8()) }, 'colour', /unknown column colour/],
    [{ fire_at: fire }, 'target', /target is required/],
    [{ target }, 'fire_at', /exactly one of fire_at and delay_ms/],
    [{ fire_at: fire, delay_ms: Int32Array.of(1), target }, 'delay_ms', /exactly one/],
    [{ fire_at: Float64Array.of(1), target }, 'fire_at', /fire_at must be Timestamp or Int64/],
    [{ delay_ms: Int32Array.of(-5), target }, 'delay_ms', /negative in row 0/],
    [{ fire_at: fire, target: Int32Array.of(1) }, 'target', /target must be Utf8/],
    [{ fire_at: fire, target: vectorFromArray([null], new Utf8()) }, 'target', /target is null in row 0/],
  ];
  for (const [columns, column, message] of expectations) {
    const ipc = ipcOf(columns);
    assert.throws(
      () => batchFromArrow(ipc, 0),
      (err) => isFermataError(err, errorCodes.batchInvalid) && err.details.column === column && message.test(err.message),
      `${Object.keys(columns).join(',')} → ${column}`,
    );
  }
});

test("the Arrow project's malformed, foreign and compressed streams are refused with BATCH_INVALID, never another error", { timeout: 120_000 }, () => {
  let files = 0;
  for (const folder of ['malformed', 'valid', 'compressed']) {
    for (const name of readdirSync(join(testdata, folder))) {
      const bytes = new Uint8Array(readFileSync(join(testdata, folder, name)));
      const started = performance.now();
      try {
        batchFromArrow(bytes, 0);
        assert.fail(`${folder}/${name} was accepted`);
      } catch (err) {
        assert.ok(err instanceof FermataError, `${folder}/${name} threw ${String(err)}`);
        assert.equal(err.code, errorCodes.batchInvalid);
        if (folder === 'valid') assert.match(err.message, /unknown column|required|must be/, `${name}: ${err.message}`);
        if (folder === 'compressed') assert.match(err.message, /compressed .* not supported/, `${name}: ${err.message}`);
      }
      assert.ok(performance.now() - started < 5_000, `${folder}/${name} took too long`);
      files++;
    }
  }
  assert.ok(files >= 90, `read ${files} files`);
});

test('arrow-forged-row-count: a stream with more rows than a batch may hold is refused before its columns are read', () => {
  const ipc = ipcOf({ fire_at: makeVector(makeData({ type: new Int64(), length: 3, data: BigInt64Array.of(1n, 2n, 3n) } as never)), target: vectorFromArray(['t', 't', 't'], new Utf8()) });
  assert.throws(() => batchFromArrow(ipc, 0, 2), (err) => isFermataError(err, errorCodes.batchInvalid) && /at most 2 timers/.test(err.message));
  assert.equal(batchFromArrow(ipc, 0, 3).rows, 3);
});

test('regression: forged Arrow counts and offsets are refused before anything is allocated for them or logged', async () => {
  const fixture = (name: string): Uint8Array => readFileSync(new URL(`../fixtures/arrow/${name}`, import.meta.url));
  // 720 bytes whose record batch claims 1.66 billion column nodes: apache-arrow alone ran out of heap.
  assert.throws(() => batchFromArrow(fixture('forged-node-count.arrows'), 0), (err: unknown) => isFermataError(err, errorCodes.batchInvalid) && /nodes vector claims/.test(err.message));
  // 728 bytes whose payload offsets run past its values: it used to be logged, then fail in memory and on every restart.
  assert.throws(() => batchFromArrow(fixture('forged-value-offsets.arrows'), 0), (err: unknown) => isFermataError(err, errorCodes.batchInvalid) && /payload: row 1's offsets/.test(err.message));
  const fs = new SimFileSystem({ seed: 1 });
  const engine = await Engine.open({ dataDir: '/data', fs });
  await assert.rejects(engine.admitArrow(fixture('forged-value-offsets.arrows')), (err: unknown) => isFermataError(err, errorCodes.batchInvalid));
  assert.equal(engine.log.lastSeq, 0, 'nothing was logged');
  await engine.close();
});

test('B13: a body holds one stream: bytes after its end-of-stream marker are refused; an Arrow file footer must point at its checked messages', () => {
  const batch = batchFromSpecs([{ fireAtMs: Date.UTC(2033, 0, 1), target: 'https://a.example/x', payload: 'p' }]);
  const ipc = batchToArrow(batch);
  const refused = (bytes: Uint8Array, pattern: RegExp): void => {
    assert.throws(() => batchFromArrow(bytes, Date.now()), (err: unknown) => isFermataError(err, errorCodes.batchInvalid) && pattern.test(err.message));
  };
  // apache-arrow would read on after the marker as if a second stream began.
  refused(Buffer.concat([ipc, ipc]), /byte \d+ follows the end-of-stream marker/);
  assert.equal(batchFromArrow(Buffer.concat([ipc, new Uint8Array(8)]), Date.now()).rows, 1, 'zero padding after the marker is harmless');

  const file = tableToIPC(tableFromArrays({ fire_at: BigInt64Array.from([BigInt(Date.UTC(2033, 0, 1))]), target: ['https://a.example/x'] } as never) as unknown as Table, 'file');
  assert.equal(batchFromArrow(file, Date.now()).rows, 1, 'an Arrow file reads');
  // Each footer block's offset points at a message frame (continuation marker -1): moved by 8
  // bytes, it points into the middle of one, where the file reader would decode unchecked bytes.
  const bytes = Buffer.from(file);
  const footerLength = bytes.readInt32LE(bytes.length - 10);
  const footerAt = bytes.length - 10 - footerLength;
  let forged = 0;
  for (let at = footerAt; at + 8 <= bytes.length - 10; at += 4) {
    const offset = Number(bytes.readBigInt64LE(at));
    if (offset < 8 || offset >= footerAt || bytes.readInt32LE(offset) !== -1) continue;
    const copy = Buffer.from(bytes);
    copy.writeBigInt64LE(BigInt(offset + 8), at);
    refused(copy, /(dictionary|record batch) block \d+ points at byte \d+, where no message of the file starts/);
    forged++;
  }
  assert.ok(forged >= 2, `the footer's blocks were found and forged (${forged})`);
  // The last message's body stretched over the marker, the footer and the magic: the walk ends
  // without the marker, and the footer (inside that body) would go unchecked.
  let lastAt = 8;
  for (let at = 8; bytes.readInt32LE(at + 4) !== 0; ) {
    lastAt = at;
    const metadataLength = bytes.readInt32LE(at + 4);
    at += 8 + metadataLength + Number(Message.decode(bytes.subarray(at + 8, at + 8 + metadataLength)).bodyLength);
  }
  const lastLength = bytes.readInt32LE(lastAt + 4);
  const bodyLength = BigInt(Message.decode(bytes.subarray(lastAt + 8, lastAt + 8 + lastLength)).bodyLength);
  const stretched = Buffer.from(bytes);
  let found = 0;
  for (let at = lastAt + 8; at + 8 <= lastAt + 8 + lastLength; at += 8) {
    if (stretched.readBigInt64LE(at) !== bodyLength) continue;
    stretched.writeBigInt64LE(BigInt(bytes.length - (lastAt + 8 + lastLength)), at);
    found++;
  }
  assert.equal(found, 1, 'the last message names its body length once');
  refused(stretched, /an Arrow file without the end-of-stream marker before its footer/);
});

test('Utf8 targets and queues in runs, with nulls between: every row keeps its own string', () => {
  // Rows with the bytes of the row before take its index undecoded: runs, a same-length
  // different string, a prefix, and nulls (queue falls back to "default") must not fool it.
  const targets = ['https://a.example/x', 'https://a.example/x', 'https://a.example/y', 'https://a.example/y', 'https://a.example/', 'https://a.example/x', 'https://a.example/x'];
  const queues = ['q1', 'q1', null, 'q1', 'q2', 'q2', null];
  const ipc = ipcOf({
    fire_at: makeVector(makeData({ type: new Int64(), length: targets.length, data: BigInt64Array.from(targets, (_, i) => BigInt(i + 1)) } as never)),
    target: vectorFromArray(targets, new Utf8()),
    queue: vectorFromArray(queues, new Utf8()),
  });
  const batch = batchFromArrow(ipc, 0);
  assert.deepEqual(rowsOf(batch).map((row) => (row as { target: string }).target), targets);
  assert.deepEqual(rowsOf(batch).map((row) => (row as { queue: string }).queue), queues.map((queue) => queue ?? 'default'));
  assert.deepEqual(batch.targets, ['https://a.example/x', 'https://a.example/y', 'https://a.example/']);
});

test('64-bit fire_at and delay_ms read from their 32-bit halves agree with exact BigInt arithmetic, at the edges of 2^53 too', () => {
  // Values around every boundary the fast path has: sign, 2^32 (a carry into the high half),
  // 2^43 (seconds × 1000 past 2^53: rounded as Number() rounds), 2^53 (exact ms), and beyond.
  const edges = [0n, 1n, -1n, 2n ** 31n, 2n ** 32n - 1n, 2n ** 32n, -(2n ** 32n), 1_796_220_000_123n, 2n ** 43n - 1n, 2n ** 43n, -(2n ** 43n), 2n ** 53n - 1n, 2n ** 53n, -(2n ** 53n), -(2n ** 53n) - 1n, 2n ** 62n + 12_345n, -(2n ** 63n), 2n ** 63n - 1n];
  const ceilDiv = (a: bigint, b: bigint): bigint => a / b + (a % b > 0n ? 1n : 0n);
  const cases: Array<[Timestamp | Int64, (raw: bigint) => number]> = [
    [new Timestamp(TimeUnit.MILLISECOND), (raw) => Number(raw)],
    [new Timestamp(TimeUnit.SECOND), (raw) => Number(raw * 1000n)],
    [new Timestamp(TimeUnit.MICROSECOND), (raw) => Number(ceilDiv(raw, 1000n))],
    [new Int64(), (raw) => Number(raw)],
  ];
  for (const [type, expected] of cases) {
    const ipc = ipcOf({
      fire_at: makeVector(makeData({ type, length: edges.length, data: BigInt64Array.from(edges) } as never)),
      target: vectorFromArray(edges.map(() => 'https://a.example/'), new Utf8()),
    });
    assert.deepEqual(Array.from(batchFromArrow(ipc, 0).fireAtMs), edges.map(expected), String(type));
  }
  const positive = edges.filter((raw) => raw >= 0n);
  const delays = ipcOf({
    delay_ms: makeVector(makeData({ type: new Int64(), length: positive.length, data: BigInt64Array.from(positive) } as never)),
    target: vectorFromArray(positive.map(() => 'https://a.example/'), new Utf8()),
  });
  assert.deepEqual(Array.from(batchFromArrow(delays, 1_000).fireAtMs), positive.map((raw) => 1_000 + Number(raw)));
  // A negative 64-bit delay is still refused, naming its row.
  const negative = ipcOf({ delay_ms: makeVector(makeData({ type: new Int64(), length: 2, data: BigInt64Array.of(5n, -(2n ** 40n)) } as never)), target: vectorFromArray(['u', 'u'], new Utf8()) });
  assert.throws(() => batchFromArrow(negative, 0), (err: unknown) => isFermataError(err, errorCodes.batchInvalid) && /delay_ms is negative in row 1/.test((err as Error).message));
});

test('a plain Utf8 column of one repeated string is read whole; one differing byte anywhere is still seen', () => {
  const read = (targets: string[]): string[] => {
    const ipc = ipcOf({
      fire_at: makeVector(makeData({ type: new Int64(), length: targets.length, data: BigInt64Array.from(targets, (_, i) => BigInt(i + 1)) } as never)),
      target: vectorFromArray(targets, new Utf8()),
    });
    const batch = batchFromArrow(ipc, 0);
    return Array.from(batch.targetIndex, (i) => batch.targets[i] as string);
  };
  const same = Array.from({ length: 50 }, () => 'https://a.example/hook');
  assert.deepEqual(read(same), same);
  for (const at of [0, 1, 24, 49]) {
    for (const other of ['https://a.example/hoo!', 'https://a.example/hook2', 'https://a.example/hoo']) {
      const targets = same.map((target, i) => (i === at ? other : target));
      assert.deepEqual(read(targets), targets, `row ${at} is ${other}`);
    }
  }
  assert.deepEqual(read(['', '', '']), ['', '', '']);
  assert.deepEqual(read(['x']), ['x']);
  // Two strings whose concatenations line up (ab ab / a ba b) are not taken for one.
  assert.deepEqual(read(['ab', 'ab', 'a', 'ba', 'b']), ['ab', 'ab', 'a', 'ba', 'b']);
  // Bytes that are not UTF-8, repeated: refused, naming the first row.
  const bad = Uint8Array.of(0xff, 0xfe, 0xff, 0xfe, 0xff, 0xfe);
  const ipc = ipcOf({
    fire_at: makeVector(makeData({ type: new Int64(), length: 3, data: BigInt64Array.of(1n, 2n, 3n) } as never)),
    target: makeVector(makeData({ type: new Utf8(), length: 3, valueOffsets: Int32Array.of(0, 2, 4, 6), data: bad })),
  });
  assert.throws(() => batchFromArrow(ipc, 0), (err: unknown) => isFermataError(err, errorCodes.batchInvalid) && /target is not valid UTF-8 in row 0/.test((err as Error).message));
});

test('a client\'s Int64 fire_at below 10^12 is refused as epoch seconds, naming the row; a logged record and a Timestamp column are read as they say', () => {
  const target = vectorFromArray(['https://a.example/', 'https://a.example/', 'https://a.example/'], new Utf8());
  const int64s = (values: bigint[]): unknown => makeVector(makeData({ type: new Int64(), length: values.length, data: BigInt64Array.from(values) } as never));
  const secondsInRow2 = ipcOf({ fire_at: int64s([1_796_220_000_000n, 1_000_000_000_000n, 1_796_220_000n]), target });
  assert.throws(
    () => batchFromArrow(secondsInRow2, 0, undefined, 'client'),
    (err: unknown) =>
      isFermataError(err, errorCodes.batchInvalid) && err.details.column === 'fire_at' && err.details.row === 2 && /^fire_at 1796220000 looks like epoch seconds: .*multiply seconds by 1000 \(1796220000 s is 1796220000000 ms\).* in row 2$/.test(err.message),
  );
  for (const small of [0n, -1n, 999_999_999_999n]) {
    const ipc = ipcOf({ fire_at: int64s([small, small, small]), target });
    assert.throws(() => batchFromArrow(ipc, 0, undefined, 'client'), (err: unknown) => isFermataError(err, errorCodes.batchInvalid) && err.details.row === 0, String(small));
  }
  // Replay reads a record logged before the rule as it was accepted (the default source).
  assert.deepEqual(Array.from(batchFromArrow(secondsInRow2, 0).fireAtMs), [1_796_220_000_000, 1_000_000_000_000, 1_796_220_000]);
  // A Timestamp says its unit: seconds are seconds, and even 0 s is a time (1970: now).
  for (const unit of [TimeUnit.SECOND, TimeUnit.MILLISECOND]) {
    const stamps = makeVector(makeData({ type: new Timestamp(unit), length: 3, data: BigInt64Array.of(1_796_220_000n, 0n, 5n) } as never));
    const scale = unit === TimeUnit.SECOND ? 1000 : 1;
    assert.deepEqual(Array.from(batchFromArrow(ipcOf({ fire_at: stamps, target }), 0, undefined, 'client').fireAtMs), [1_796_220_000 * scale, 0, 5 * scale]);
  }
});
