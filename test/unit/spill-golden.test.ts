// Golden files of the spill format (test/fixtures/spill/, docs/format/spill.md), one set per
// version, each a checkpoint of the same timers (test/helpers/spill-golden.ts): a manifest, a
// resident run and a spilled run with their keys sidecars. Versions 1 and 2, written by the
// releases before, are still read: their runs verify and decode to the same timers, with no
// failures (version 1) and no callbacks (both: they have no columns for them); version 3's read
// back with them and no created_at. Version 4 is what this release writes, byte for byte (but
// for the manifest's header, which says manifest version 5), and reads back with the failures,
// the callbacks and the spilled timers' created_at. And an engine opened on any serves the same
// timers; one opened on version 1 writes its next checkpoint with version 4 runs, so an upgrade
// loses nothing.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { type Clock, Engine } from '../../engine/engine.ts';
import type { FileSystem } from '../../engine/fs/file-system.ts';
import { encodeTimerId } from '../../engine/ids.ts';
import { nodeFileSystem } from '../../engine/fs/node-file-system.ts';
import { readManifest, writeManifest } from '../../engine/spill/manifest.ts';
import { readRunBucket, readRunKeys, type RunMeta, verifyRun, writeRun } from '../../engine/spill/run-file.ts';
import { bytesOf, createdAtOf, failureOf, type RunRows, RunRowsBuilder } from '../../engine/spill/run-rows.ts';
import { callbackBytesOf, failureCallbackBytesOf, packCallbacks, urlOrNull } from '../../engine/store/callback-bytes.ts';
import { withManifestVersion } from '../helpers/format-patch.ts';
import { goldenBucketWidthMs, goldenManifest, goldenResident, goldenSpilled, goldenT0, type GoldenTimer } from '../helpers/spill-golden.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const fixtures = (version: number): string => new URL(`../fixtures/spill/v${version}`, import.meta.url).pathname;
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const stateNames: Record<number, string> = { 1: 'pending', 3: 'retrying', 4: 'delivered', 5: 'dead', 6: 'cancelled' };

/** The golden timers as run rows, with their failures when `withFailures`, their callbacks when `withCallbacks`, their created_at when `withCreatedAt`. */
function goldenRows(timers: readonly GoldenTimer[], withFailures: boolean, withCallbacks = false, withCreatedAt = false): RunRows {
  const builder = new RunRowsBuilder(8);
  for (const [i, timer] of timers.entries()) {
    const callbacks = withCallbacks && timer.callbacks !== undefined ? packCallbacks(encoder.encode(timer.callbacks.callback), encoder.encode(timer.callbacks.failureCallback)) : new Uint8Array(0);
    builder.append(withCreatedAt ? timer : { ...timer, createdAtMs: NaN }, timer.queue, timer.target, encoder.encode(timer.key), timer.payload, encoder.encode(timer.headers), callbacks);
    if (withFailures && timer.failure !== undefined) builder.setFailure(i, timer.failure.error, timer.failure.attemptedAtMs);
  }
  return builder.finish();
}

/** Every row of `rows` as plain values, the failure too. */
function plain(rows: RunRows): unknown[] {
  return Array.from({ length: rows.rows }, (_, i) => {
    const failure = failureOf(rows.failures, i);
    return {
      seq: rows.seq[i],
      row: rows.row[i],
      fireAtMs: rows.fireAtMs[i],
      dueAtMs: rows.dueAtMs[i],
      state: rows.state[i],
      attempts: rows.attempts[i],
      lastStatus: rows.lastStatus[i],
      deadReason: rows.deadReason[i],
      queue: rows.queues[rows.queueIndex[i] as number],
      target: rows.targets[rows.targetIndex[i] as number],
      key: decoder.decode(bytesOf(rows.keys, i)),
      payload: [...bytesOf(rows.payload, i)],
      headers: decoder.decode(bytesOf(rows.headers, i)),
      failure: failure < 0 ? undefined : { error: rows.failures.errors[failure], attemptedAtMs: rows.failures.attemptedAtMs[failure] },
      callback: rows.callbacks === undefined ? null : urlOrNull(callbackBytesOf(bytesOf(rows.callbacks, i))),
      failureCallback: rows.callbacks === undefined ? null : urlOrNull(failureCallbackBytesOf(bytesOf(rows.callbacks, i))),
      createdAtMs: createdAtOf(rows, i),
    };
  });
}

async function readRun(fs: FileSystem, dir: string, meta: RunMeta): Promise<unknown[]> {
  await verifyRun(fs, dir, meta);
  const rows: unknown[] = [];
  for (let bucket = 0; bucket < meta.buckets.length; bucket++) rows.push(...plain(await readRunBucket(fs, dir, meta, bucket)));
  return rows;
}

/**
 * A simulated disk whose data directory holds the version's golden checkpoint as its spill
 * directory, beside the log that checkpoint leaves: records up to its sequence (9), which it
 * covers (a checkpointed log keeps the segment being written).
 */
async function diskWith(version: number): Promise<SimFileSystem> {
  const fs = new SimFileSystem({ seed: version });
  const engine = await Engine.open({ dataDir: '/data', fs, clock });
  while (engine.log.lastSeq < 9) await engine.setQueue('other', { max_attempts: 1 + engine.log.lastSeq });
  await engine.close();
  await fs.mkdirp('/data/spill');
  for (const name of readdirSync(fixtures(version))) {
    const handle = await fs.open(`/data/spill/${name}`, 'create');
    await handle.writev([new Uint8Array(readFileSync(`${fixtures(version)}/${name}`))], 0);
    await handle.datasync();
    await handle.close();
  }
  await fs.syncDir('/data/spill');
  return fs;
}

const clock: Clock = { now: () => goldenT0 };
const idOf = (timer: GoldenTimer): string => encodeTimerId(timer.seq, timer.row, timer.fireAtMs);

/** What an engine on `fs` says of every golden timer (spilled ones read from their run). */
async function views(fs: SimFileSystem): Promise<unknown[]> {
  const engine = await Engine.open({ dataDir: '/data', fs, clock });
  try {
    const out: unknown[] = [];
    for (const timer of [...goldenResident, ...goldenSpilled]) {
      const view = await engine.lookup(idOf(timer));
      assert.ok(view !== undefined, `timer ${idOf(timer)}`);
      out.push({ state: view.state, attempts: view.attempts, queue: view.queue, target: view.target, key: view.key, lastStatus: view.lastStatus, lastError: view.lastError, lastAttemptAtMs: view.lastAttemptAtMs, callback: view.callback, failureCallback: view.failureCallback });
    }
    return out;
  } finally {
    await engine.close();
  }
}

/** The views the golden timers must get: their failures and callbacks only when the checkpoint holds them. */
function expectedViews(withFailures: boolean, withCallbacks = false): unknown[] {
  return [...goldenResident, ...goldenSpilled].map((timer) => ({
    state: stateNames[timer.state],
    attempts: timer.attempts,
    queue: timer.queue,
    target: timer.target,
    key: timer.key === '' ? null : timer.key,
    lastStatus: timer.lastStatus === 0 ? null : timer.lastStatus,
    lastError: withFailures ? (timer.failure?.error ?? null) : null,
    lastAttemptAtMs: withFailures ? (timer.failure?.attemptedAtMs ?? null) : null,
    callback: withCallbacks && timer.callbacks !== undefined && timer.callbacks.callback !== '' ? timer.callbacks.callback : null,
    failureCallback: withCallbacks && timer.callbacks !== undefined && timer.callbacks.failureCallback !== '' ? timer.callbacks.failureCallback : null,
  }));
}

test('golden, version 1 (the previous release): the manifest, both runs and their keys are read; the timers are the same, with no failures', async () => {
  const dir = fixtures(1);
  const manifest = await readManifest(nodeFileSystem, dir);
  assert.ok(manifest !== undefined);
  assert.equal(manifest.residentRun.version, 1);
  assert.equal(manifest.spilledRuns[0]?.version, 1);
  assert.deepEqual(await readRun(nodeFileSystem, dir, manifest.residentRun), plain(goldenRows(goldenResident, false)));
  assert.deepEqual(await readRun(nodeFileSystem, dir, manifest.spilledRuns[0] as RunMeta), plain(goldenRows(goldenSpilled, false)));
  assert.deepEqual((await readRunKeys(nodeFileSystem, dir, manifest.residentRun)).map((section) => section.length), [1, 0, 0, 1]);
});

test('golden, version 2 (the previous release): read back with their failures and no callbacks', async () => {
  const manifest = await readManifest(nodeFileSystem, fixtures(2));
  assert.ok(manifest !== undefined && manifest.residentRun.version === 2);
  const residentRows = await readRun(nodeFileSystem, fixtures(2), manifest.residentRun);
  assert.deepEqual(residentRows, plain(goldenRows(goldenResident, true)));
  assert.equal(residentRows.filter((row) => (row as { failure?: unknown }).failure !== undefined).length, 2);
  assert.deepEqual(await readRun(nodeFileSystem, fixtures(2), manifest.spilledRuns[0] as RunMeta), plain(goldenRows(goldenSpilled, false)));
});

test('golden, version 3 (the previous release): read back with their failures and callbacks, and no created_at', async () => {
  const manifest = await readManifest(nodeFileSystem, fixtures(3));
  assert.ok(manifest !== undefined && manifest.residentRun.version === 3);
  assert.deepEqual(await readRun(nodeFileSystem, fixtures(3), manifest.residentRun), plain(goldenRows(goldenResident, true, true)));
  const spilledRows = await readRun(nodeFileSystem, fixtures(3), manifest.spilledRuns[0] as RunMeta);
  assert.deepEqual(spilledRows, plain(goldenRows(goldenSpilled, false, true)));
  assert.deepEqual(spilledRows.map((row) => (row as { createdAtMs: unknown }).createdAtMs), [null, null]);
});

test('golden, version 4: this release writes the same bytes from the same timers (its manifest saying version 5), and reads them back with their failures, callbacks and created_at', async () => {
  const fs = new SimFileSystem({ seed: 4 });
  const dir = '/data/spill';
  await fs.mkdirp(dir);
  const resident = await writeRun(fs, dir, 1, 9, goldenRows(goldenResident, true, true), { bucketWidthMs: goldenBucketWidthMs });
  const spilled = await writeRun(fs, dir, 2, 9, goldenRows(goldenSpilled, true, true, true), { bucketWidthMs: goldenBucketWidthMs });
  await writeManifest(fs, dir, goldenManifest(resident, spilled));
  const names = readdirSync(fixtures(4)).sort();
  assert.deepEqual((await fs.list(dir)).sort(), names);
  // The manifest's own version is 5 (the schedules files); the rest of its bytes are version 4's.
  const golden = (name: string): Uint8Array => new Uint8Array(readFileSync(`${fixtures(4)}/${name}`));
  for (const name of names) assert.deepEqual(await fs.readFile(`${dir}/${name}`), name === 'MANIFEST' ? withManifestVersion(golden(name), 5) : golden(name), name);

  const manifest = await readManifest(nodeFileSystem, fixtures(4));
  assert.ok(manifest !== undefined && manifest.residentRun.version === 4);
  const residentRows = await readRun(nodeFileSystem, fixtures(4), manifest.residentRun);
  assert.deepEqual(residentRows, plain(goldenRows(goldenResident, true, true)));
  assert.deepEqual(
    residentRows.map((row) => [(row as { callback: unknown }).callback, (row as { failureCallback: unknown }).failureCallback]).filter(([a, b]) => a !== null || b !== null),
    [['https://cb.example/ok', 'https://cb.example/dead']],
  );
  const spilledRows = await readRun(nodeFileSystem, fixtures(4), manifest.spilledRuns[0] as RunMeta);
  assert.deepEqual(spilledRows, plain(goldenRows(goldenSpilled, false, true, true)));
  assert.deepEqual(spilledRows.map((row) => (row as { createdAtMs: unknown }).createdAtMs), [goldenT0 - 2_000, goldenT0 - 1_000]);
});

test('an engine opened on a version 1 checkpoint serves its timers, and its next checkpoint writes version 4 runs and loses none of them', async () => {
  const fs = await diskWith(1);
  assert.deepEqual(await views(fs), expectedViews(false));
  const engine = await Engine.open({ dataDir: '/data', fs, clock });
  await engine.checkpoint();
  await engine.close();
  const manifest = await readManifest(fs, '/data/spill');
  assert.equal(manifest?.residentRun.version, 4, 'the resident run is written anew');
  assert.equal(manifest?.spilledRuns[0]?.version, 1, 'a spilled run is kept as it was');
  assert.deepEqual(await views(fs), expectedViews(false));
});

test('an engine opened on a version 2 checkpoint shows why the failed timers failed, and when', async () => {
  const fs = await diskWith(2);
  assert.deepEqual(await views(fs), expectedViews(true));
  const engine = await Engine.open({ dataDir: '/data', fs, clock });
  try {
    const dead = engine.listDead(10);
    assert.deepEqual(
      dead.map((timer) => [timer.id, timer.reason, timer.lastError, timer.lastAttemptAtMs]),
      [[idOf(goldenResident[4] as GoldenTimer), 'attempts_exhausted', 'connection refused', goldenT0 + 40_000]],
    );
  } finally {
    await engine.close();
  }
});

test('an engine opened on a version 3 checkpoint shows the timers\' callbacks, resident and spilled, and keeps them across its next checkpoint', async () => {
  const fs = await diskWith(3);
  assert.deepEqual(await views(fs), expectedViews(true, true));
  const engine = await Engine.open({ dataDir: '/data', fs, clock });
  await engine.checkpoint();
  await engine.close();
  assert.deepEqual(await views(fs), expectedViews(true, true));
});

test('an engine opened on a version 4 checkpoint shows the spilled timers\' created_at from their run', async () => {
  const fs = await diskWith(4);
  const engine = await Engine.open({ dataDir: '/data', fs, clock });
  try {
    const createdAt = [];
    for (const timer of goldenSpilled) createdAt.push((await engine.lookup(idOf(timer)))?.createdAtMs);
    assert.deepEqual(createdAt, [goldenT0 - 2_000, goldenT0 - 1_000]);
  } finally {
    await engine.close();
  }
});
