// Format versions and upgrades (engine/format-version.ts, docs/operations.md "Upgrade and
// downgrade"). A data directory written by the previous release (test/fixtures/data-v1/) opens
// with every timer, queue and schedule it held. Files a newer release would write (a WAL segment
// of a later version, a spill manifest of a later version, a record of a type this build does not
// know, all with matching checksums) are refused with FORMAT_TOO_NEW naming the file, the version
// found and the one known, and left as they were; a record whose checksum fails stays corrupt.
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ManualClock } from '../../engine/clock.ts';
import { Engine } from '../../engine/engine.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { formatVersions } from '../../engine/format-version.ts';
import { decodeManifest, encodeManifest } from '../../engine/spill/manifest-codec.ts';
import { decodeSegmentHeader } from '../../engine/wal/decoder.ts';
import { encodeSegmentHeader } from '../../engine/wal/encoder.ts';
import { withFirstRecordType, withManifestVersion, withWalVersion } from '../helpers/format-patch.ts';
import { startService } from '../helpers/service.ts';

interface Expected {
  readonly t0: number;
  readonly timers: ReadonlyArray<{ id: string; state: string; revision: number; fireAtMs: number; queue: string; key: string | null; payload: string }>;
  readonly queues: ReadonlyArray<{ name: string; paused: boolean; config: { max_attempts: number; rate_per_s: number | null } }>;
  readonly schedules: readonly string[];
}

const fixture = (path: string): string => new URL(`../fixtures/${path}`, import.meta.url).pathname;
const expected = JSON.parse(readFileSync(fixture('data-v1/expected.json'), 'utf8')) as Expected;
const scratch = mkdtempSync(join(tmpdir(), 'fermata-format-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

let copies = 0;
/** A copy of a fixture data directory (opening one may write: a lock, a repair). */
function copyOf(path: string): string {
  const dir = join(scratch, `data-${++copies}`);
  cpSync(fixture(path), dir, { recursive: true });
  return dir;
}

const open = (dataDir: string): Promise<Engine> => Engine.open({ dataDir, clock: new ManualClock(expected.t0) });

/** The only segment the fixture's log holds. */
function segmentOf(dataDir: string): string {
  const names = readdirSync(join(dataDir, 'wal')).filter((name) => name.endsWith('.wal'));
  assert.equal(names.length, 1);
  return join(dataDir, 'wal', names[0] as string);
}

async function refusal(dataDir: string): Promise<Error & { code: string; details: Record<string, unknown> }> {
  const err = await open(dataDir).then(
    async (engine) => {
      await engine.close();
      assert.fail('the engine opened');
    },
    (thrown: unknown) => thrown,
  );
  assert.ok(isFermataError(err), String(err));
  return err as Error & { code: string; details: Record<string, unknown> };
}

/** Opens a copy of the fixture `folder` and finds in it what its expected.json says. */
async function opensWhole(folder: string): Promise<void> {
  const expected = JSON.parse(readFileSync(fixture(`${folder}/expected.json`), 'utf8')) as Expected;
  assert.ok(expected.timers.some((timer) => timer.key?.startsWith('far-') && timer.state === 'pending'), 'the fixture holds a spilled timer');
  const engine = await open(copyOf(`${folder}/data`));
  try {
    const page = await engine.listTimers({}, 1000);
    const found = page.timers.map((view) => ({ id: view.id, state: view.state, revision: view.revision, fireAtMs: view.fireAtMs, queue: view.queue, key: view.key, payload: new TextDecoder().decode(view.payload) }));
    assert.deepEqual(found, expected.timers);
    for (const timer of expected.timers) assert.equal((await engine.lookup(timer.id))?.state, timer.state, timer.id);
    assert.deepEqual(
      engine.queues().map(({ name, paused, config }) => ({ name, paused, config: { max_attempts: config.max_attempts, rate_per_s: config.rate_per_s } })),
      expected.queues,
    );
    assert.deepEqual(
      engine.listSchedules(100).schedules.map((schedule) => schedule.name),
      expected.schedules,
    );
  } finally {
    await engine.close();
  }
}

test("the previous release's data directory (manifest version 4, schedules inline) opens with every timer, queue and schedule it held", () => opensWhole('data-v1'));

test("this release's data directory (manifest version 5, a schedules file) opens with every timer, queue and schedule it held", async () => {
  const manifest = readFileSync(fixture('data-v2/data/spill/MANIFEST'));
  assert.equal(new DataView(manifest.buffer, manifest.byteOffset).getUint16(12, true), 5);
  assert.ok(decodeManifest(manifest).scheduleFile !== undefined, 'its schedules are in a schedules file');
  await opensWhole('data-v2');
});

test('the newer-version fixture is refused naming its manifest, the version found and the versions known', async () => {
  const dataDir = copyOf('data-newer/data');
  const err = await refusal(dataDir);
  assert.equal(err.code, errorCodes.formatTooNew);
  assert.equal(err.details.file, join(dataDir, 'spill', 'MANIFEST'));
  assert.equal(err.details.found, 6);
  assert.match(err.message, /spill\/MANIFEST: spill manifest format version 6 is newer than this build reads \(versions 1–5\)/);
});

test('fermata serve on the newer-version fixture exits before listening, its last log line coded FORMAT_TOO_NEW', async () => {
  const dataDir = copyOf('data-newer/data');
  await assert.rejects(startService(dataDir), (err: Error) => /exited before listening/.test(err.message) && /"code":"FORMAT_TOO_NEW"/.test(err.message) && err.message.includes(`${dataDir}/spill/MANIFEST: spill manifest format version 6`));
});

test('a WAL segment of a later format version is refused and left where it is, even a last one that holds no record', async () => {
  const dataDir = copyOf('data-v1/data');
  const segment = segmentOf(dataDir);
  const newer = withWalVersion(readFileSync(segment), 2);
  writeFileSync(segment, newer);
  const err = await refusal(dataDir);
  assert.equal(err.code, errorCodes.formatTooNew);
  assert.equal(err.details.file, segment);
  assert.match(err.message, /WAL segment format version 2 is newer than this build reads \(version 1\)/);
  assert.deepEqual(readFileSync(segment), Buffer.from(newer), 'untouched');

  // A last segment with a header only would otherwise be taken for a torn creation and set aside.
  const fresh = copyOf('data-v1/data');
  const next = join(fresh, 'wal', '0000000003.wal');
  writeFileSync(next, withWalVersion(encodeSegmentHeader(3, 1_000), 2));
  const empty = await refusal(fresh);
  assert.equal(empty.code, errorCodes.formatTooNew);
  assert.equal(empty.details.file, next);
  assert.ok(existsSync(next) && !readdirSync(join(fresh, 'wal')).some((name) => name.includes('.broken')), 'nothing set aside');
});

test('a whole record of an unknown type is refused as newer, naming segment, type and the types known; a garbled one stays corrupt', async () => {
  const dataDir = copyOf('data-v1/data');
  const segment = segmentOf(dataDir);
  const original = readFileSync(segment);
  writeFileSync(segment, withFirstRecordType(original, 14));
  const err = await refusal(dataDir);
  assert.equal(err.code, errorCodes.formatTooNew);
  assert.equal(err.details.file, segment);
  assert.equal(err.details.found, 14);
  assert.match(err.message, /record type \(sequence \d+, offset 32\) 14 is newer than this build reads \(record types 1–13, record-type set 1\)/);

  // The same type byte without the checksum to match is damage: records of later groups follow
  // it, so recovery refuses it as corrupt, as before.
  const garbled = Buffer.from(original);
  garbled[32 + 20] = 14;
  writeFileSync(segment, garbled);
  assert.equal((await refusal(dataDir)).code, errorCodes.walCorrupt);
});

test('segment header verdicts: a later version is too new, version 0 is corrupt', () => {
  const header = encodeSegmentHeader(1, 1);
  assert.deepEqual(decodeSegmentHeader(withWalVersion(header, 2)), { verdict: 'too-new', version: 2 });
  assert.equal(decodeSegmentHeader(withWalVersion(header, 0)).verdict, 'corrupt');
  assert.equal(decodeSegmentHeader(header).verdict, 'ok');
});

test('manifest verdicts: a later version is too new, version 0 is corrupt, versions 4 and 5 read', () => {
  const manifest = readFileSync(fixture('data-v1/data/spill/MANIFEST'));
  assert.equal(new DataView(manifest.buffer, manifest.byteOffset).getUint16(12, true), 4, "the previous release's manifest is version 4");
  assert.throws(
    () => decodeManifest(withManifestVersion(manifest, 6)),
    (err) => isFermataError(err, errorCodes.formatTooNew) && err.details.file === 'MANIFEST' && err.details.found === 6 && /\(versions 1–5\)/.test(err.message),
  );
  assert.throws(() => decodeManifest(withManifestVersion(manifest, 0)), (err) => isFermataError(err, errorCodes.spillCorrupt));
  assert.equal(decodeManifest(manifest).residentRun.version, 4);
  assert.equal(decodeManifest(withManifestVersion(manifest, 5)).residentRun.version, 4, 'a version 5 manifest names version 4 runs');
});

test('a manifest this release writes says version 5 (the schedules files), so that a release reading up to 4 refuses it rather than lose the schedules', () => {
  const written = encodeManifest(decodeManifest(readFileSync(fixture('data-v1/data/spill/MANIFEST'))));
  assert.equal(new DataView(written.buffer, written.byteOffset).getUint16(12, true), 5);
  assert.equal(decodeManifest(written).residentRun.version, 4, 'its runs keep their own version');
  assert.deepEqual(formatVersions, { wal: 1, recordSet: 1, manifest: 5, spill: 4 });
});
