// Run files (engine/spill/, docs/format/spill.md): random rows written and read back batch by
// batch (a few with a failed last attempt: last_error, last_attempt_at), the keys sidecar against keyHash, random access reading only the asked batch's bytes,
// apache-arrow reading a run as a plain Arrow file, and every kind of damage refused with
// SPILL_CORRUPT naming the file and the offset: bit flips in batches, head and footer, a wrong
// stamp, truncation, and the Arrow project's malformed and foreign streams put where a run,
// a keys sidecar or a batch should be. Runs on the simulated file system unless a real file is needed.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { crc32 } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { tableFromIPC } from 'apache-arrow';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import type { FileHandle, FileSystem } from '../../engine/fs/file-system.ts';
import { nodeFileSystem } from '../../engine/fs/node-file-system.ts';
import { keyHash } from '../../engine/store/key-index.ts';
import { timerState } from '../../engine/store/resident-store.ts';
import { keysFileName, runFileName } from '../../engine/spill/format.ts';
import { readRunBucket, readRunKeys, type RunMeta, verifyRun, writeRun } from '../../engine/spill/run-file.ts';
import { bytesOf, createdAtOf, failureOf, type RunRows, RunRowsBuilder, sortRunRows } from '../../engine/spill/run-rows.ts';
import { arrowIpcTestData } from '../helpers/fixtures.ts';
import { Prng } from '../helpers/prng.ts';
import { testScratch } from '../helpers/scratch.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { packCallbacks } from '../../engine/store/callback-bytes.ts';

const dir = '/data/spill';
const scratch = testScratch('fermata-spill-run');
const widthMs = 60_000;
const testdata = fileURLToPath(arrowIpcTestData);
const encoder = new TextEncoder();
const states = [timerState.pending, timerState.retrying, timerState.delivered, timerState.dead, timerState.cancelled];
const texts = ['', 'a', 'ключ', '🙂 payload', 'x'.repeat(300), 'tab\tnul\u0000end'];
const errorTexts = ['HTTP 503', 'timeout after 10000 ms', 'TLS: certificate has expired', 'refused by the SSRF guard: 10.0.0.1 is private', 'é'.repeat(128)];

/**
 * Random timers in a few buckets with gaps between them (empty buckets), and one bucket of
 * `hugeRows` rows; keys, headers and payloads empty or not, some of them non-ASCII.
 */
function randomRows(prng: Prng, rows: number, hugeRows = 0): RunRows {
  const builder = new RunRowsBuilder(4);
  const baseMs = 1_800_000_000_000;
  for (let i = 0; i < rows + hugeRows; i++) {
    const dueAtMs = i < rows ? baseMs + prng.below(12) * 3 * widthMs + prng.below(widthMs) : baseMs + 40 * widthMs + prng.below(widthMs);
    const key = prng.below(3) === 0 ? new Uint8Array(0) : encoder.encode(`${texts[prng.below(texts.length)]}#${i}`);
    const headers = prng.coin() ? new Uint8Array(0) : encoder.encode(JSON.stringify({ 'x-n': texts[prng.below(texts.length)] }));
    const payload = prng.below(4) === 0 ? new Uint8Array(0) : prng.bytes(prng.below(200));
    builder.append(
      { seq: 1 + i * 3 + prng.below(3), row: prng.below(2 ** 24), fireAtMs: dueAtMs - prng.below(1000), dueAtMs, state: states[prng.below(states.length)] as number, attempts: prng.below(5), lastStatus: prng.below(600), deadReason: prng.below(4) },
      prng.coin() ? 'default' : `queue-${prng.below(3)}-ü`,
      `https://t${prng.below(4)}.example/ключ/${prng.below(2)}`,
      key,
      payload,
      headers,
      // One timer in six has callbacks: one URL, the other, or both.
      prng.below(6) === 0 ? packCallbacks(prng.coin() ? encoder.encode(`https://cb.example/ok/${i}`) : new Uint8Array(0), encoder.encode(`https://cb.example/dead/${i}`)) : new Uint8Array(0),
    );
    // One timer in five failed its last attempt, some at times past 2^32 ms and some before 1970.
    if (prng.below(5) === 0) builder.setFailure(i, errorTexts[prng.below(errorTexts.length)] as string, prng.coin() ? baseMs + prng.below(widthMs) : -prng.below(2 ** 40));
  }
  return sortRunRows(builder.finish());
}

/** Every row as plain values (strings resolved, bytes as arrays), for deepEqual. */
function plain(rows: RunRows): unknown[] {
  const out: unknown[] = [];
  for (let i = 0; i < rows.rows; i++) {
    out.push([
      rows.seq[i],
      rows.row[i],
      rows.fireAtMs[i],
      rows.dueAtMs[i],
      rows.state[i],
      rows.attempts[i],
      rows.lastStatus[i],
      rows.deadReason[i],
      rows.queues[rows.queueIndex[i] as number],
      rows.targets[rows.targetIndex[i] as number],
      [...bytesOf(rows.keys, i)],
      [...bytesOf(rows.payload, i)],
      [...bytesOf(rows.headers, i)],
      failureOf(rows.failures, i) < 0 ? null : [rows.failures.errors[failureOf(rows.failures, i)], rows.failures.attemptedAtMs[failureOf(rows.failures, i)]],
      rows.callbacks === undefined ? [] : [...bytesOf(rows.callbacks, i)],
    ]);
  }
  return out;
}

async function readAll(fs: FileSystem, meta: RunMeta): Promise<unknown[]> {
  const out: unknown[] = [];
  for (let b = 0; b < meta.buckets.length; b++) out.push(...plain(await readRunBucket(fs, dir, meta, b)));
  return out;
}

function isCorrupt(file: string, offset?: number, message?: RegExp): (err: unknown) => boolean {
  return (err) => {
    assert.ok(isFermataError(err, errorCodes.spillCorrupt), `expected SPILL_CORRUPT, got ${String(err)}`);
    assert.equal(err.details.file, file, err.message);
    if (offset !== undefined) assert.equal(err.details.offset, offset, err.message);
    if (message !== undefined) assert.match(err.message, message);
    assert.match(err.message, new RegExp(`^${file.replace('.', '\\.')} at byte \\d+: `));
    return true;
  };
}

async function simWithRun(seed: number, rows: RunRows, options = {}): Promise<{ fs: SimFileSystem; meta: RunMeta }> {
  const fs = new SimFileSystem({ seed, maxExtraHops: 0 });
  await fs.mkdirp(dir);
  const meta = await writeRun(fs, dir, 7, 42, rows, { bucketWidthMs: widthMs, ...options });
  return { fs, meta };
}

test('round trip: random rows written as a run read back batch by batch, equal to the input; the keys sidecar holds their hashes', async () => {
  for (let seed = 1; seed <= 12; seed++) {
    const prng = new Prng(seed);
    const rows = randomRows(prng, prng.below(300), seed % 3 === 0 ? 3_000 : 0);
    const batchBytesMax = seed % 3 === 0 ? 16 * 1024 : 64 * 1024 * 1024;
    const { fs, meta } = await simWithRun(seed, rows, { batchBytesMax });
    assert.equal(meta.rows, rows.rows);
    assert.deepEqual(await readAll(fs, meta), plain(rows), `seed ${seed}`);
    // One batch per non-empty bucket, or several consecutive ones for a bucket over the limit.
    const buckets = new Set(Array.from(rows.dueAtMs, (ms) => Math.floor(ms / widthMs) * widthMs));
    assert.deepEqual([...new Set(meta.buckets.map((b) => b.startMs))], [...buckets], `seed ${seed}`);
    if (seed % 3 === 0) assert.ok(meta.buckets.length > buckets.size, 'the huge bucket was cut into several batches');
    else assert.equal(meta.buckets.length, buckets.size);
    const keys = await readRunKeys(fs, dir, meta);
    let at = 0;
    for (const [b, bucket] of meta.buckets.entries()) {
      const expected: number[] = [];
      for (let i = at; i < at + bucket.rows; i++) if (bytesOf(rows.keys, i).length > 0) expected.push(keyHash(bytesOf(rows.keys, i)));
      assert.deepEqual([...(keys[b] as Uint32Array)], expected.sort((x, y) => x - y), `seed ${seed} bucket ${b}`);
      at += bucket.rows;
    }
    await verifyRun(fs, dir, meta);
  }
});

test('a run is fdatasynced as it is written, one sync in flight at a time, not only at its end', async () => {
  const prng = new Prng(5);
  const rows = randomRows(prng, 0, 3_000);
  const sim = new SimFileSystem({ seed: 5, maxExtraHops: 0 });
  await sim.mkdirp(dir);
  // Where the run file had been written to at each fdatasync of it, and how many were in flight at once.
  const syncedAt: number[] = [];
  let inFlight = 0;
  let inFlightMax = 0;
  // The simulated file system, with the run file's writev and datasync watched.
  const overriding = <T extends object>(target: T, overrides: Partial<T>): T =>
    new Proxy(target, {
      get: (object, name) => {
        if (Object.hasOwn(overrides, name)) return overrides[name as keyof T];
        const value: unknown = Reflect.get(object, name, object);
        return typeof value === 'function' ? value.bind(object) : value;
      },
    });
  const fs = overriding<FileSystem>(sim, {
    open: async (path, mode) => {
      const handle = await sim.open(path, mode);
      if (!path.endsWith(runFileName(7))) return handle;
      let written = 0;
      return overriding<FileHandle>(handle, {
        writev: async (chunks, position) => {
          await handle.writev(chunks, position);
          written = Math.max(written, position + chunks.reduce((sum, chunk) => sum + chunk.length, 0));
        },
        datasync: async () => {
          syncedAt.push(written);
          inFlightMax = Math.max(inFlightMax, ++inFlight);
          // Slow enough that writes go on meanwhile.
          await new Promise((resolve) => setTimeout(resolve, 2));
          await handle.datasync();
          inFlight--;
        },
      });
    },
  });
  const meta = await writeRun(fs, dir, 7, 42, rows, { bucketWidthMs: widthMs, batchBytesMax: 4 * 1024, syncBytes: 64 * 1024 });
  assert.ok(meta.bytes > 8 * 64 * 1024, `the run (${meta.bytes} B) spans many sync intervals`);
  assert.ok(syncedAt.length >= Math.floor(meta.bytes / (64 * 1024)), `synced ${syncedAt.length} times over ${meta.bytes} B, every 64 KiB written`);
  assert.ok(syncedAt[0] !== undefined && syncedAt[0] < meta.bytes / 2, 'the first sync came long before the end');
  assert.equal(inFlightMax, 1, 'never two fdatasyncs of the run at once');
  assert.deepEqual(await readAll(sim, meta), plain(rows));
});

test('an empty run is a valid run with no batches', async () => {
  const { fs, meta } = await simWithRun(1, new RunRowsBuilder().finish());
  assert.equal(meta.buckets.length, 0);
  assert.deepEqual(await readRunKeys(fs, dir, meta), []);
  await verifyRun(fs, dir, meta);
});

test('writeRun refuses unsorted rows and states a run never holds (bugs, not conditions)', async () => {
  const builder = new RunRowsBuilder();
  const fields = { seq: 2, row: 0, fireAtMs: 5, dueAtMs: 5, state: timerState.pending, attempts: 0, lastStatus: 0, deadReason: 0 };
  builder.append(fields, 'q', 't', new Uint8Array(0), new Uint8Array(0), new Uint8Array(0));
  builder.append({ ...fields, seq: 1 }, 'q', 't', new Uint8Array(0), new Uint8Array(0), new Uint8Array(0));
  const fs = new SimFileSystem({ seed: 1 });
  await fs.mkdirp(dir);
  await assert.rejects(writeRun(fs, dir, 1, 1, builder.finish()), /out of \(dueAt, seq, row\) order/);
  const delivering = new RunRowsBuilder();
  delivering.append({ ...fields, state: timerState.delivering }, 'q', 't', new Uint8Array(0), new Uint8Array(0), new Uint8Array(0));
  await assert.rejects(writeRun(fs, dir, 2, 1, delivering.finish()), /state 2 is not written/);
});

/** Counts the bytes read through every handle it opens. */
function countingFs(fs: FileSystem): { fs: FileSystem; bytesRead: () => number } {
  let bytes = 0;
  const wrap = (handle: FileHandle): FileHandle => ({
    writeThrough: handle.writeThrough,
    writev: (chunks, position) => handle.writev(chunks, position),
    read: async (into, position) => {
      const read = await handle.read(into, position);
      bytes += read;
      return read;
    },
    datasync: () => handle.datasync(),
    truncate: (length) => handle.truncate(length),
    size: () => handle.size(),
    close: () => handle.close(),
  });
  return {
    fs: { mkdirp: (p) => fs.mkdirp(p), list: (p) => fs.list(p), readFile: (p) => fs.readFile(p), rename: (a, b) => fs.rename(a, b), unlink: (p) => fs.unlink(p), syncDir: (p) => fs.syncDir(p), lockDir: (p) => fs.lockDir(p), open: async (path, mode, options) => wrap(await fs.open(path, mode, options)) },
    bytesRead: () => bytes,
  };
}

test('random access: reading a batch reads exactly its bytes, nothing else of the file', async () => {
  const { fs, meta } = await simWithRun(3, randomRows(new Prng(3), 400));
  assert.ok(meta.buckets.length >= 5);
  const counting = countingFs(fs);
  for (const [b, bucket] of meta.buckets.entries()) {
    const before = counting.bytesRead();
    const rows = await readRunBucket(counting.fs, dir, meta, b);
    assert.equal(rows.rows, bucket.rows);
    assert.equal(counting.bytesRead() - before, bucket.byteLength, `batch ${b}`);
  }
});

test("apache-arrow's tableFromIPC reads a run file whole: a real Arrow file with the documented schema and metadata", async () => {
  const real = scratch.tempDir('arrow');
  const rows = randomRows(new Prng(5), 200);
  const meta = await writeRun(nodeFileSystem, real, 9, 1234, rows, { bucketWidthMs: widthMs });
  const table = tableFromIPC(readFileSync(join(real, runFileName(9))));
  assert.equal(table.numRows, rows.rows);
  assert.equal(table.batches.length, meta.buckets.length);
  assert.deepEqual(
    table.schema.fields.map((field) => `${field.name}:${field.type}:${field.nullable}`),
    [
      'seq:Float64:false',
      'row:Uint32:false',
      'fire_at:Timestamp<MILLISECOND, UTC>:false',
      'due_at:Timestamp<MILLISECOND, UTC>:false',
      'state:Uint8:false',
      'attempts:Uint16:false',
      'last_status:Uint16:false',
      'queue:Utf8:false',
      'target:Utf8:false',
      'key:Binary:true',
      'payload:Binary:false',
      'headers:Binary:true',
      'dead_reason:Uint8:false',
      'last_error:Utf8:true',
      'last_attempt_at:Timestamp<MILLISECOND, UTC>:true',
      'callback:Utf8:true',
      'failure_callback:Utf8:true',
      'created_at:Timestamp<MILLISECOND, UTC>:true',
    ],
  );
  assert.deepEqual(Object.fromEntries(table.schema.metadata), { 'fermata.spill.version': '4', 'fermata.stamp': '1234', 'fermata.run': '9', 'fermata.bucket_width_ms': String(widthMs) });
  const dueAt = table.getChild('due_at')?.toArray() as BigInt64Array;
  assert.deepEqual(Array.from(dueAt, Number), Array.from(rows.dueAtMs));
  const keys = table.getChild('key')?.toArray() as Array<Uint8Array | null>;
  for (let i = 0; i < rows.rows; i++) {
    const key = bytesOf(rows.keys, i);
    assert.deepEqual(keys[i] === null ? null : [...(keys[i] as Uint8Array)], key.length === 0 ? null : [...key], `row ${i}`);
  }
  assert.deepEqual(table.getChild('target')?.toArray(), Array.from(rows.targetIndex, (t) => rows.targets[t]));
  assert.ok(rows.failures.rows.length > 10, 'some rows failed');
  const errors = table.getChild('last_error');
  const attemptedAt = table.getChild('last_attempt_at');
  for (let i = 0; i < rows.rows; i++) {
    const failure = failureOf(rows.failures, i);
    assert.equal(errors?.get(i), failure < 0 ? null : rows.failures.errors[failure], `row ${i}`);
    const at = attemptedAt?.get(i) as bigint | number | null;
    assert.equal(at === null ? null : Number(at), failure < 0 ? null : rows.failures.attemptedAtMs[failure], `row ${i}`);
  }
});

test('a flipped bit anywhere in a batch is refused with SPILL_CORRUPT naming the file and the batch offset', async () => {
  const prng = new Prng(11);
  const { fs, meta } = await simWithRun(11, randomRows(prng, 150));
  const path = `${dir}/${runFileName(7)}`;
  for (const [b, bucket] of meta.buckets.entries()) {
    const offsets = [0, bucket.byteLength - 1, ...Array.from({ length: 6 }, () => prng.below(bucket.byteLength))];
    for (const within of offsets) {
      const at = bucket.fileOffset + within;
      const original = (await fs.readFile(path))[at] as number;
      const bit = 1 << prng.below(8);
      fs.corrupt(path, at, Uint8Array.of(original ^ bit));
      await assert.rejects(readRunBucket(fs, dir, meta, b), isCorrupt(runFileName(7), bucket.fileOffset, /batch \d+ .* fails its checksum/));
      await assert.rejects(verifyRun(fs, dir, meta), isCorrupt(runFileName(7)));
      fs.corrupt(path, at, Uint8Array.of(original));
      // Other batches still read: damage is local.
      if (meta.buckets.length > 1) await readRunBucket(fs, dir, meta, (b + 1) % meta.buckets.length);
    }
  }
  await verifyRun(fs, dir, meta);
});

test('a flipped bit in the head, the tail or the footer fails verifyRun with SPILL_CORRUPT, never another error or a hang', async () => {
  const { fs, meta } = await simWithRun(12, randomRows(new Prng(12), 60));
  const path = `${dir}/${runFileName(7)}`;
  const bytes = await fs.readFile(path);
  const places = [...Array.from({ length: meta.headBytes }, (_, i) => i).filter((i) => i % 7 === 0), ...Array.from({ length: meta.bytes - meta.tailOffset }, (_, i) => meta.tailOffset + i)];
  for (const at of places) {
    for (const bit of [0x01, 0x80]) {
      fs.corrupt(path, at, Uint8Array.of((bytes[at] as number) ^ bit));
      await assert.rejects(verifyRun(fs, dir, meta), isCorrupt(runFileName(7)), `bit ${bit} of byte ${at}`);
      fs.corrupt(path, at, Uint8Array.of(bytes[at] as number));
    }
  }
  await verifyRun(fs, dir, meta);
});

test('a run stamped otherwise than the manifest says is refused, naming both stamps', async () => {
  const rows = randomRows(new Prng(13), 40);
  for (const otherStamp of [43, 1_000_000]) {
    const { fs, meta } = await simWithRun(13, rows);
    await fs.mkdirp('/other');
    await writeRun(fs, '/other', 7, otherStamp, rows, { bucketWidthMs: widthMs });
    for (const name of [runFileName(7), keysFileName(7)]) {
      const foreign = await fs.readFile(`/other/${name}`);
      await fs.unlink(`${dir}/${name}`);
      const handle = await fs.open(`${dir}/${name}`, 'create');
      await handle.writev([foreign], 0);
      await handle.close();
    }
    await assert.rejects(verifyRun(fs, dir, meta), isCorrupt(runFileName(7), undefined, new RegExp(`stamped ${otherStamp}, the manifest expects 42`)));
    const keysMeta = { ...meta, keysBytes: (await fs.readFile(`${dir}/${keysFileName(7)}`)).length };
    await assert.rejects(readRunKeys(fs, dir, keysMeta), isCorrupt(keysFileName(7), 24, new RegExp(`stamped ${otherStamp}, the manifest expects 42`)));
  }
});

test('a truncated run or keys file is refused at any length', async () => {
  const { fs, meta } = await simWithRun(14, randomRows(new Prng(14), 80));
  const path = `${dir}/${runFileName(7)}`;
  const whole = await fs.readFile(path);
  const lengths = new Set([0, 1, 8, meta.headBytes - 1, meta.headBytes, meta.tailOffset, meta.bytes - 1]);
  for (const bucket of meta.buckets) for (const d of [-1, 0, 1, 100]) lengths.add(bucket.fileOffset + d);
  for (const length of lengths) {
    const handle = await fs.open(path, 'readwrite');
    await handle.truncate(length);
    await handle.close();
    await assert.rejects(verifyRun(fs, dir, meta), isCorrupt(runFileName(7)), `truncated to ${length}`);
    const cut = meta.buckets.findIndex((bucket) => bucket.fileOffset + bucket.byteLength > length);
    if (cut >= 0) await assert.rejects(readRunBucket(fs, dir, meta, cut), isCorrupt(runFileName(7), undefined, /the file ends at byte|fails its checksum/));
    const restore = await fs.open(path, 'readwrite');
    await restore.writev([whole], 0);
    await restore.close();
  }
  await verifyRun(fs, dir, meta);
  const keysPath = `${dir}/${keysFileName(7)}`;
  const keys = await fs.readFile(keysPath);
  for (let length = 0; length < keys.length; length += 3) {
    const handle = await fs.open(keysPath, 'readwrite');
    await handle.truncate(length);
    await handle.close();
    await assert.rejects(readRunKeys(fs, dir, meta), isCorrupt(keysFileName(7)));
    const restore = await fs.open(keysPath, 'readwrite');
    await restore.writev([keys], 0);
    await restore.close();
  }
});

const foreignFiles = ['malformed', 'valid', 'compressed'].flatMap((folder) => readdirSync(join(testdata, folder)).map((name) => ({ label: `${folder}/${name}`, bytes: new Uint8Array(readFileSync(join(testdata, folder, name))) })));

test("the Arrow project's malformed and foreign streams in place of a run or a keys file are refused with SPILL_CORRUPT", async () => {
  assert.ok(foreignFiles.length >= 90, `found ${foreignFiles.length} test files`);
  const { fs, meta } = await simWithRun(15, randomRows(new Prng(15), 30));
  for (const { label, bytes } of foreignFiles) {
    for (const name of [runFileName(7), keysFileName(7)]) {
      await fs.unlink(`${dir}/${name}`);
      const handle = await fs.open(`${dir}/${name}`, 'create');
      await handle.writev([bytes], 0);
      await handle.close();
    }
    const started = performance.now();
    await assert.rejects(readRunBucket(fs, dir, meta, 0), isCorrupt(runFileName(7)), label);
    await assert.rejects(verifyRun(fs, dir, meta), isCorrupt(runFileName(7)), label);
    // Sizes made to match, so the checks past the size run on the foreign bytes too.
    await assert.rejects(verifyRun(fs, dir, { ...meta, bytes: bytes.length, tailOffset: Math.min(meta.tailOffset, bytes.length) }), isCorrupt(runFileName(7)), label);
    await assert.rejects(readRunKeys(fs, dir, { ...meta, keysBytes: bytes.length }), isCorrupt(keysFileName(7)), label);
    assert.ok(performance.now() - started < 5_000, `${label} took too long`);
  }
});

test('foreign Arrow bytes whose checksum matches (as if the manifest named them) still fail to decode as a run batch: SPILL_CORRUPT', async () => {
  const fs = new SimFileSystem({ seed: 16, maxExtraHops: 0 });
  await fs.mkdirp(dir);
  for (const { label, bytes } of foreignFiles) {
    await fs.unlink(`${dir}/${runFileName(8)}`).catch(() => undefined);
    const handle = await fs.open(`${dir}/${runFileName(8)}`, 'create');
    await handle.writev([bytes], 0);
    await handle.close();
    // The stream's messages after its schema message, where a batch would be.
    for (const skip of [0, 8]) {
      if (bytes.length <= skip) continue;
      const meta: RunMeta = {
        runId: 8,
        version: 2,
        stamp: 1,
        bucketWidthMs: widthMs,
        rows: 3,
        bytes: bytes.length,
        headBytes: skip,
        headCrc32: 0,
        tailOffset: bytes.length,
        tailCrc32: 0,
        keysBytes: 0,
        buckets: [{ startMs: 0, rows: 3, keyed: 0, fileOffset: skip, byteLength: bytes.length - skip, crc32: crc32(bytes.subarray(skip)) }],
      };
      const started = performance.now();
      await assert.rejects(readRunBucket(fs, dir, meta, 0), isCorrupt(runFileName(8), skip, /does not decode|expected one record batch|rows|column|state|null|offsets|UTF-8/), label);
      assert.ok(performance.now() - started < 5_000, `${label} took too long`);
    }
  }
});

test('created_at round-trips per row, null where unknown, through appendFrom too, and a run without any reads as none', async () => {
  const fs = new SimFileSystem({ seed: 41 });
  await fs.mkdirp('/runs');
  const builder = new RunRowsBuilder(4);
  const known = [1_800_000_000_123, NaN, 1_700_000_000_000, NaN];
  for (const [i, createdAtMs] of known.entries()) {
    builder.append({ seq: 10 + i, row: 0, fireAtMs: widthMs * 5 + i, dueAtMs: widthMs * 5 + i, state: timerState.pending, attempts: 0, lastStatus: 0, deadReason: 0, createdAtMs }, 'default', 'https://a.example/', new Uint8Array(0), new Uint8Array(0), new Uint8Array(0));
  }
  const meta = await writeRun(fs, '/runs', 1, 1, builder.finish(), { bucketWidthMs: widthMs });
  const rows = await readRunBucket(fs, '/runs', meta, 0);
  assert.deepEqual(Array.from({ length: rows.rows }, (_, i) => createdAtOf(rows, i)), [1_800_000_000_123, null, 1_700_000_000_000, null]);
  // Compaction copies rows with appendFrom: created_at goes along.
  const copy = new RunRowsBuilder(1);
  for (let i = rows.rows - 1; i >= 0; i--) copy.appendFrom(rows, i);
  const copied = copy.finish();
  assert.deepEqual(Array.from({ length: copied.rows }, (_, i) => createdAtOf(copied, i)), [null, 1_700_000_000_000, null, 1_800_000_000_123]);

  builder.reset();
  builder.append({ seq: 20, row: 0, fireAtMs: widthMs * 5, dueAtMs: widthMs * 5, state: timerState.pending, attempts: 0, lastStatus: 0, deadReason: 0 }, 'default', 'https://a.example/', new Uint8Array(0), new Uint8Array(0), new Uint8Array(0));
  const none = await readRunBucket(fs, '/runs', await writeRun(fs, '/runs', 2, 1, builder.finish(), { bucketWidthMs: widthMs }), 0);
  assert.equal(none.createdAtMs, undefined);
  assert.equal(createdAtOf(none, 0), null);
});
