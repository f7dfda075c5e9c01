// The spill MANIFEST (engine/spill/manifest.ts, docs/format/spill.md): its bytes round-trip
// (±Infinity fields, tombstones sorted on write), damage is refused with SPILL_CORRUPT, and
// writeManifest is atomic under power loss: cut at every file-system call of it, on many
// seeds, the directory holds exactly the old manifest or exactly the new one, and once it has
// resolved, the new one. A canary with an fdatasync that syncs nothing proves the simulation
// would catch a missing sync. removeUnreferenced deletes exactly the files no manifest names.
// Golden bytes: the worked examples of docs/format/spill.md (manifest and keys sidecar), and
// those of version 1, which are still read: the runs a version 1 manifest names are version 1's.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { crc32 } from '../../engine/checksum.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { keysFileName, manifestFileName, manifestTempFileName, runFileName } from '../../engine/spill/format.ts';
import { decodeManifest, encodeManifest, type Manifest, readManifest, removeUnreferenced, writeManifest } from '../../engine/spill/manifest.ts';
import { decodeKeys, encodeKeys } from '../../engine/spill/keys-file.ts';
import type { RunMeta } from '../../engine/spill/run-meta.ts';
import { arrowIpcTestData } from '../helpers/fixtures.ts';
import { soak } from '../helpers/soak.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { withoutDatasync } from '../sim/without-datasync.ts';

const dir = '/data/spill';
const testdata = fileURLToPath(arrowIpcTestData);

/** A well-formed run entry (the manifest checks shape and offsets, not the files). */
function runMeta(runId: number, stamp: number, batches: number): RunMeta {
  const buckets = Array.from({ length: batches }, (_, i) => ({ startMs: 3_600_000 * (10 + i), rows: 5 + i, keyed: i, fileOffset: 800 + 1000 * i, byteLength: 1000, crc32: (0x9e3779b9 * (i + runId)) >>> 0 }));
  return {
    runId,
    version: 2,
    stamp,
    bucketWidthMs: 3_600_000,
    rows: buckets.reduce((sum, b) => sum + b.rows, 0),
    bytes: 800 + 1000 * batches + 500,
    headBytes: 800,
    headCrc32: 0xdeadbeef,
    tailOffset: 800 + 1000 * batches,
    tailCrc32: 12345,
    keysBytes: 32 + 4 * batches,
    buckets,
  };
}

function manifest(seq: number, tombstones: number): Manifest {
  const seqs = new Float64Array(tombstones);
  const rows = new Uint32Array(tombstones);
  const fireAtMs = new Float64Array(tombstones);
  // Written out of order on purpose: the encoder sorts.
  for (let i = 0; i < tombstones; i++) {
    seqs[i] = 1 + ((i * 7919) % (tombstones * 3));
    rows[i] = i % 5;
    fireAtMs[i] = 1_800_000_000_000 + i;
  }
  return {
    checkpointSeq: seq,
    watermarkMs: seq % 2 === 0 ? Infinity : 3_600_000 * 12,
    releasedExpiryMaxMs: -Infinity,
    nextRunId: seq + 3,
    residentRun: runMeta(seq + 1, seq, 2),
    spilledRuns: [{ ...runMeta(seq + 2, seq, 3), validFromMs: 3_600_000 * 11 }],
    queues: [{ name: 'default', config: { max_attempts: 5, backoff: { base_ms: 100 } } }, { name: 'ключ', config: {} }],
    tombstones: { seqs, rows, fireAtMs },
  };
}

/** The manifest with its tombstones sorted by (seq, row), as reading gives it. */
function sorted(m: Manifest): Manifest {
  return decodeManifest(encodeManifest(m));
}

test('a manifest round-trips: runs, queues, ±Infinity fields, tombstones sorted by (seq, row)', () => {
  const m = manifest(4, 50);
  const back = decodeManifest(encodeManifest(m));
  assert.equal(back.watermarkMs, Infinity);
  assert.equal(back.releasedExpiryMaxMs, -Infinity);
  assert.deepEqual(back.residentRun, m.residentRun);
  assert.deepEqual(back.spilledRuns, m.spilledRuns);
  assert.deepEqual(back.queues, m.queues);
  const order = Array.from(m.tombstones.seqs, (_, i) => i).sort((a, b) => (m.tombstones.seqs[a] as number) - (m.tombstones.seqs[b] as number) || (m.tombstones.rows[a] as number) - (m.tombstones.rows[b] as number));
  assert.deepEqual(Array.from(back.tombstones.seqs), order.map((i) => m.tombstones.seqs[i]));
  assert.deepEqual(Array.from(back.tombstones.rows), order.map((i) => m.tombstones.rows[i]));
  assert.deepEqual(Array.from(back.tombstones.fireAtMs), order.map((i) => m.tombstones.fireAtMs[i]));
  assert.deepEqual(decodeManifest(encodeManifest(back)), back);
});

test('a manifest whose runs do not hold together is not written (a bug) and not read (SPILL_CORRUPT)', () => {
  const m = manifest(5, 0);
  assert.throws(() => encodeManifest({ ...m, nextRunId: m.residentRun.runId }), /not below nextRunId/);
  assert.throws(() => encodeManifest({ ...m, residentRun: { ...m.residentRun, stamp: 6 } }), /after the checkpoint/);
  assert.throws(() => encodeManifest({ ...m, spilledRuns: [{ ...m.residentRun, validFromMs: 0 }] }), /named twice/);
  const gap = { ...m.residentRun, buckets: m.residentRun.buckets.map((b, i) => (i === 1 ? { ...b, fileOffset: b.fileOffset + 1 } : b)) };
  assert.throws(() => encodeManifest({ ...m, residentRun: gap }), /does not start where the one before it ends/);
});

test('every flipped bit, every truncation and foreign bytes in a manifest are refused with SPILL_CORRUPT naming MANIFEST', () => {
  const bytes = encodeManifest(manifest(7, 20));
  const refused = (candidate: Uint8Array, what: string): void => {
    assert.throws(() => decodeManifest(candidate), (err) => isFermataError(err, errorCodes.spillCorrupt) && err.details.file === manifestFileName && typeof err.details.offset === 'number', what);
  };
  for (let at = 0; at < bytes.length; at++) {
    const flipped = bytes.slice();
    flipped[at] = (flipped[at] as number) ^ (1 << (at % 8));
    refused(flipped, `bit flip at ${at}`);
  }
  for (let length = 0; length < bytes.length; length += 5) refused(bytes.subarray(0, length), `truncated to ${length}`);
  refused(new Uint8Array([...bytes, 0]), 'one byte too many');
  for (const folder of ['malformed', 'valid', 'compressed']) {
    for (const name of readdirSync(join(testdata, folder))) refused(new Uint8Array(readFileSync(join(testdata, folder, name))), `${folder}/${name}`);
  }
});

test('readManifest: undefined in a fresh directory; what writeManifest wrote; SPILL_CORRUPT past the size limit', async () => {
  const fs = new SimFileSystem({ seed: 1 });
  await fs.mkdirp(dir);
  assert.equal(await readManifest(fs, dir), undefined);
  const m = manifest(8, 3);
  await writeManifest(fs, dir, m);
  assert.deepEqual(await readManifest(fs, dir), sorted(m));
  await assert.rejects(readManifest(fs, dir, 100), (err) => isFermataError(err, errorCodes.spillCorrupt) && /more than the 100/.test(err.message));
});

/** Runs `work` on `fs`, cutting the power at its `crashAt`-th file-system call; returns the disk image. */
async function withPowerLossAt(fs: SimFileSystem, crashAt: number, work: () => Promise<void>): Promise<{ image: SimFileSystem; finished: boolean }> {
  let image: SimFileSystem | undefined;
  fs.setFault(() => {
    if (image === undefined && fs.opCount >= crashAt) image = fs.powerLoss();
    return undefined;
  });
  const finished = await work().then(
    () => true,
    () => false,
  );
  return { image: image ?? fs.powerLoss(), finished };
}

/** A directory whose durable manifest is `old`, maybe with a stale MANIFEST.tmp beside it. */
async function withOldManifest(seed: number, old: Manifest, staleTemp: boolean): Promise<SimFileSystem> {
  const fs = new SimFileSystem({ seed });
  await fs.mkdirp(dir);
  await writeManifest(fs, dir, old);
  if (staleTemp) {
    const handle = await fs.open(`${dir}/${manifestTempFileName}`, 'create');
    await handle.writev([new Uint8Array(100).fill(7)], 0);
    await handle.datasync();
    await handle.close();
    await fs.syncDir(dir);
  }
  return fs;
}


test('power loss at every step of writeManifest leaves exactly the old manifest or exactly the new one; after it resolves, the new one', async () => {
  const old = manifest(10, 5);
  const next = manifest(11, 9);
  const probe = await withOldManifest(1, old, true);
  const before = probe.opCount;
  await writeManifest(probe, dir, next);
  const calls = probe.opCount - before;
  assert.ok(calls >= 6, `writeManifest made ${calls} calls`);
  const seeds = soak ? 400 : 40;
  let sawOld = 0;
  let sawNew = 0;
  for (let seed = 1; seed <= seeds; seed++) {
    for (let step = 0; step <= calls; step++) {
      const fs = await withOldManifest(seed, old, seed % 2 === 0);
      const { image, finished } = await withPowerLossAt(fs, fs.opCount + step + 1, () => writeManifest(fs, dir, next));
      const found = await readManifest(image, dir);
      const context = `seed ${seed}, power lost at call ${step + 1} of ${calls}`;
      if (finished) {
        assert.deepEqual(found, sorted(next), `${context}: writeManifest resolved, so the new manifest must survive`);
      } else {
        const isOld = JSON.stringify(found) === JSON.stringify(sorted(old));
        const isNew = JSON.stringify(found) === JSON.stringify(sorted(next));
        assert.ok(isOld || isNew, `${context}: found neither manifest`);
        if (isOld) sawOld++;
        else sawNew++;
      }
      // The next checkpoint from the recovered directory works (a stale temp file is replaced).
      await writeManifest(image, dir, manifest(12, 1));
      assert.deepEqual(await readManifest(image, dir), sorted(manifest(12, 1)), context);
    }
  }
  assert.ok(sawOld > 0 && sawNew > 0, `power losses found both outcomes (old ${sawOld}, new ${sawNew})`);
});

test('canary: with an fdatasync that syncs nothing, a power loss after writeManifest finds a damaged manifest', async () => {
  const old = manifest(10, 5);
  const next = manifest(11, 200);
  for (let seed = 1; seed <= 200; seed++) {
    const fs = await withOldManifest(seed, old, false);
    await writeManifest(withoutDatasync(fs), dir, next);
    const image = fs.powerLoss();
    const caught = await readManifest(image, dir).then(
      (found) => JSON.stringify(found) !== JSON.stringify(sorted(next)),
      (err: unknown) => isFermataError(err, errorCodes.spillCorrupt),
    );
    if (caught) return;
  }
  assert.fail('200 power losses never caught a manifest renamed into place without its data synced');
});

test('removeUnreferenced deletes the run and keys files the manifest does not name and a stale MANIFEST.tmp, and nothing else', async () => {
  const fs = new SimFileSystem({ seed: 3 });
  await fs.mkdirp(dir);
  const m = manifest(20, 0);
  const named = [m.residentRun.runId, ...m.spilledRuns.map((run) => run.runId)];
  await writeManifest(fs, dir, m);
  const files = [...[1, 2, ...named, 99].flatMap((id) => [runFileName(id), keysFileName(id)]), manifestTempFileName, 'README', 'run-12.arrow'];
  for (const name of files) await (await fs.open(`${dir}/${name}`, 'create')).close();
  const removed = await removeUnreferenced(fs, dir, m);
  assert.deepEqual(removed, [runFileName(1), keysFileName(1), runFileName(2), keysFileName(2), runFileName(99), keysFileName(99), manifestTempFileName].sort());
  const left = (await fs.list(dir)).sort();
  assert.deepEqual(left, [manifestFileName, 'README', 'run-12.arrow', ...named.flatMap((id) => [runFileName(id), keysFileName(id)])].sort());
  // Durable: the deletions survive a power loss.
  const image = fs.powerLoss({ mode: 'keep-none' });
  assert.deepEqual((await image.list(dir)).sort(), left);
  // Without a manifest (a fresh directory) no run is named: all of them go.
  assert.deepEqual(await removeUnreferenced(image, dir, undefined), named.flatMap((id) => [runFileName(id), keysFileName(id)]).sort());
});

const hex = (text: string): number[] => text.split(/\s+/).filter(Boolean).map((b) => parseInt(b, 16));

test("golden: docs/format/spill.md's worked examples are the bytes the encoders write", () => {
  const keys = encodeKeys(7, 42, [Uint32Array.of(0x3c2569b2, 0x4f31114c), new Uint32Array(0)]);
  assert.deepEqual([...keys], hex('46 52 4d 54 4b 45 59 0a 9c 76 61 85 04 00 20 00 07 00 00 00 02 00 00 00 2a 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 b2 69 25 3c 4c 11 31 4f'));
  const emptyRun: RunMeta = { runId: 1, version: 4, stamp: 5, bucketWidthMs: 3_600_000, rows: 0, bytes: 2578, headBytes: 1280, headCrc32: 1813203270, tailOffset: 1280, tailCrc32: 587072097, keysBytes: 32, buckets: [] };
  const bytes = encodeManifest({ checkpointSeq: 5, watermarkMs: 3_600_000, releasedExpiryMaxMs: -Infinity, nextRunId: 2, residentRun: emptyRun, spilledRuns: [], queues: [], tombstones: { seqs: Float64Array.of(3), rows: Uint32Array.of(1), fireAtMs: Float64Array.of(7_200_000) } });
  assert.equal(bytes.length, 0x16c);
  assert.deepEqual([...bytes.subarray(0, 0x18)], hex('46 52 4d 54 4d 41 4e 0a f2 fe c1 1d 05 00 18 00 40 01 00 00 01 00 00 00'));
  assert.equal(
    new TextDecoder().decode(bytes.subarray(0x18, 0x158)),
    '{"checkpointSeq":5,"watermarkMs":3600000,"releasedExpiryMaxMs":"-Infinity","nextRunId":2,"residentRun":{"runId":1,"version":4,"stamp":5,"bucketWidthMs":3600000,"rows":0,"bytes":2578,"headBytes":1280,"headCrc32":1813203270,"tailOffset":1280,"tailCrc32":587072097,"keysBytes":32,"buckets":[]},"spilledRuns":[],"queues":[]}',
  );
  assert.deepEqual([...bytes.subarray(0x158)], hex('00 00 00 00 00 00 08 40  00 00 00 00 40 77 5b 41  01 00 00 00'));
});

test('golden, version 1: the worked examples of the previous release are read, their runs as version 1 runs', () => {
  const json =
    '{"checkpointSeq":5,"watermarkMs":3600000,"releasedExpiryMaxMs":"-Infinity","nextRunId":2,"residentRun":{"runId":1,"stamp":5,"bucketWidthMs":3600000,"rows":0,"bytes":1970,"headBytes":976,"headCrc32":4218402453,"tailOffset":976,"tailCrc32":1242158068,"keysBytes":32,"buckets":[]},"spilledRuns":[],"queues":[]}';
  const manifestV1 = Uint8Array.from([
    ...hex('46 52 4d 54 4d 41 4e 0a 57 80 05 07 01 00 18 00 33 01 00 00 01 00 00 00'),
    ...new TextEncoder().encode(json),
    ...hex('00 00 00 00 00  00 00 00 00 00 00 08 40  00 00 00 00 40 77 5b 41  01 00 00 00'),
  ]);
  const m = decodeManifest(manifestV1);
  assert.deepEqual(m.residentRun, { ...(JSON.parse(json) as { residentRun: object }).residentRun, version: 1 });
  assert.deepEqual([m.checkpointSeq, m.watermarkMs, m.nextRunId, [...m.tombstones.seqs], [...m.tombstones.rows]], [5, 3_600_000, 2, [3], [1]]);
  // Read back, it is written as manifest version 5, its run still version 1.
  assert.equal(decodeManifest(encodeManifest(m)).residentRun.version, 1);
  const keysV1 = Uint8Array.from(hex('46 52 4d 54 4b 45 59 0a 9e fa 41 28 01 00 20 00 07 00 00 00 02 00 00 00 2a 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 b2 69 25 3c 4c 11 31 4f'));
  const twoBatches = runMeta(7, 42, 2);
  const keysMeta = { ...twoBatches, version: 1, keysBytes: keysV1.length, buckets: twoBatches.buckets.map((bucket, i) => ({ ...bucket, keyed: i === 0 ? 2 : 0 })) };
  assert.deepEqual(decodeKeys(keysV1, keysFileName(7), keysMeta).map((section) => [...section]), [[0x3c2569b2, 0x4f31114c], []]);
  // A sidecar is read in its run's version only, and a manifest of a later version not at all.
  assert.throws(() => decodeKeys(keysV1, keysFileName(7), { ...keysMeta, version: 2 }), (err) => isFermataError(err, errorCodes.spillCorrupt) && /version 1 is not its run's \(2\)/.test(err.message));
  const later = encodeManifest(manifest(3, 0));
  const view = new DataView(later.buffer);
  view.setUint16(12, 6, true);
  view.setUint32(8, crc32(later.subarray(12)), true);
  assert.throws(() => decodeManifest(later), (err) => isFermataError(err, errorCodes.formatTooNew) && /spill manifest format version 6 is newer than this build reads \(versions 1–5\)/.test(err.message));
});
