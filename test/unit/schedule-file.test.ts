// Schedules in a checkpoint's files of their own (engine/schedules/schedule-file.ts,
// schedule-checkpoint.ts; docs/format/spill.md "Schedules files"): the manifest names a schedules
// file and holds its checksums, not the schedules; a checkpoint writes it again only when a
// schedule changed, and the marks alone when only they moved. A manifest that holds its schedules
// inline (test/fixtures/data-v1, the previous release's) still opens, and its next checkpoint
// moves them into a file. A damaged section refuses to start, naming the file; a manifest whose
// schedules files do not hold together is refused. Golden bytes: docs/format/spill.md's worked
// example of a schedules file and its marks file. 100,000 schedules
// are restored and looked at by the materializer over many turns of the event loop, inline and
// from a file alike.
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ManualClock } from '../../engine/clock.ts';
import { Engine, type ScheduleInput } from '../../engine/engine.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { nodeFileSystem } from '../../engine/fs/node-file-system.ts';
import { ScheduleBook } from '../../engine/schedules/schedule-book.ts';
import { definitionJson } from '../../engine/schedules/schedule-records.ts';
import type { ManifestSchedule } from '../../engine/schedules/schedule-checkpoint.ts';
import { encodeScheduleHeader, encodeScheduleMarks, encodeScheduleSection, readScheduleFile, scheduleFileMagic, type ScheduleFileMeta, scheduleFileName, scheduleHeaderBytes, scheduleMarksFileName } from '../../engine/schedules/schedule-file.ts';
import { crc32 } from '../../engine/checksum.ts';
import { decodeManifest, encodeManifest, type Manifest, readManifest } from '../../engine/spill/manifest.ts';

const t0 = 1_800_000_000_000;
const minute = 60_000;
const hour = 3_600_000;
const timer = { target: 'http://127.0.0.1:9/hook', queue: 'default', payload: new TextEncoder().encode('tick'), headers: '' };
const everyMinute = (extra: Partial<ScheduleInput> = {}): ScheduleInput => ({ everyMs: minute, startAtMs: t0, ...timer, ...extra });

const scratch = mkdtempSync(join(tmpdir(), 'fermata-schedule-file-'));
after(() => rmSync(scratch, { recursive: true, force: true }));
let dirs = 0;
const freshDir = (): string => join(scratch, `data-${++dirs}`);

/** Waits until the materializer has nothing left to do at the clock's position (it runs on timers of 0 ms). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 5));
}

async function manifestOf(dataDir: string): Promise<Manifest> {
  const manifest = await readManifest(nodeFileSystem, join(dataDir, 'spill'));
  assert.ok(manifest !== undefined);
  return manifest;
}

const scheduleFiles = (dataDir: string): string[] => readdirSync(join(dataDir, 'spill')).filter((name) => name.startsWith('schedule')).sort();

async function occurrenceKeys(engine: Engine): Promise<string[]> {
  const page = await engine.listTimers({ keyPrefix: new TextEncoder().encode('schedule:') }, 1000);
  return page.timers.map((view) => view.key as string).sort();
}

test('a checkpoint keeps the schedules in a file the manifest names, written again only when they changed', async () => {
  const dataDir = freshDir();
  const clock = new ManualClock(t0 + 10_000);
  let engine = await Engine.open({ dataDir, clock });
  await engine.putSchedule('minutely', everyMinute());
  await engine.putSchedule('hourly', everyMinute({ everyMs: hour }));
  await settle();
  await engine.checkpoint();
  const first = (await manifestOf(dataDir)).scheduleFile;
  assert.ok(first !== undefined && first.rows === 2 && first.marks === undefined, 'the manifest names a schedules file of both');
  assert.equal((await manifestOf(dataDir)).schedules, undefined, 'none inline');
  assert.deepEqual(scheduleFiles(dataDir), [scheduleFileName(first.fileId)]);

  await engine.checkpoint();
  assert.deepEqual((await manifestOf(dataDir)).scheduleFile, first, 'nothing moved: the same file, named again');

  // Occurrences created move the marks, and only them.
  await engine.moveClock({ advanceMs: 2 * minute });
  await settle();
  await engine.checkpoint();
  const marked = (await manifestOf(dataDir)).scheduleFile;
  assert.ok(marked?.marks !== undefined && marked.fileId === first.fileId, 'the marks file goes with the same schedules file');
  assert.deepEqual(scheduleFiles(dataDir), [scheduleMarksFileName(marked.marks.fileId), scheduleFileName(first.fileId)]);
  const before = await occurrenceKeys(engine);
  await engine.close();

  // Reopened: the marks file's marks hold, so nothing is created again.
  engine = await Engine.open({ dataDir, clock: new ManualClock(clock.now()) });
  await settle();
  assert.deepEqual(await occurrenceKeys(engine), before);
  await engine.setSchedulePaused('hourly', true);
  await engine.checkpoint();
  const paused = (await manifestOf(dataDir)).scheduleFile;
  assert.ok(paused !== undefined && paused.fileId !== first.fileId && paused.marks === undefined, 'a pause: a new schedules file, marks inside it');
  assert.deepEqual(scheduleFiles(dataDir), [scheduleFileName(paused.fileId)], 'the files no manifest names are gone');
  await engine.close();

  engine = await Engine.open({ dataDir, clock: new ManualClock(clock.now()) });
  await settle();
  assert.equal(engine.schedule('hourly')?.paused, true);
  assert.deepEqual(
    (await occurrenceKeys(engine)).filter((key) => key.startsWith('schedule:minutely:')),
    before.filter((key) => key.startsWith('schedule:minutely:')),
  );
  await engine.deleteSchedule('hourly');
  await engine.deleteSchedule('minutely');
  await engine.checkpoint();
  assert.equal((await manifestOf(dataDir)).scheduleFile, undefined, 'no schedules: no file');
  assert.deepEqual(scheduleFiles(dataDir), []);
  await engine.close();
});

test("the previous release's manifest, schedules inline, opens; its next checkpoint moves them into a file", async () => {
  const dataDir = freshDir();
  cpSync(new URL('../fixtures/data-v1/data', import.meta.url).pathname, dataDir, { recursive: true });
  const inline = (await manifestOf(dataDir)).schedules;
  assert.deepEqual(inline?.map((entry) => entry.name), ['hourly-report'], 'the fixture holds its schedule inline');
  const clock = new ManualClock(t0);
  let engine = await Engine.open({ dataDir, clock });
  await settle();
  const before = await occurrenceKeys(engine);
  assert.ok(before.length > 0);
  await engine.checkpoint();
  const manifest = await manifestOf(dataDir);
  assert.equal(manifest.schedules, undefined);
  assert.equal(manifest.scheduleFile?.rows, 1);
  await engine.close();
  engine = await Engine.open({ dataDir, clock: new ManualClock(clock.now()) });
  await settle();
  assert.equal(engine.schedule('hourly-report')?.definition.queue, 'reports');
  assert.deepEqual(await occurrenceKeys(engine), before, 'the mark came through: nothing created again');
  await engine.close();
});

test('a damaged schedules section refuses to start, naming the file and the offset', async () => {
  const dataDir = freshDir();
  const engine = await Engine.open({ dataDir, clock: new ManualClock(t0) });
  await engine.putSchedule('s', everyMinute());
  await engine.checkpoint();
  await engine.close();
  const meta = (await manifestOf(dataDir)).scheduleFile;
  assert.ok(meta !== undefined);
  const path = join(dataDir, 'spill', scheduleFileName(meta.fileId));
  const bytes = readFileSync(path);
  bytes[scheduleHeaderBytes + 3] = (bytes[scheduleHeaderBytes + 3] as number) ^ 0x01;
  writeFileSync(path, bytes);
  await assert.rejects(Engine.open({ dataDir, clock: new ManualClock(t0) }), (err) => {
    return isFermataError(err, errorCodes.spillCorrupt) && err.details.file === scheduleFileName(meta.fileId) && err.details.offset === scheduleHeaderBytes && /section checksum mismatch/.test(err.message);
  });
});

const hex = (text: string): number[] => text.split(/\s+/).filter(Boolean).map((b) => parseInt(b, 16));

test("golden: docs/format/spill.md's worked example is what the encoders write, and reads back with the marks file's mark", async () => {
  const entry: ManifestSchedule = { name: 's', created_at_ms: 0, updated_at_ms: 0, paused: false, mark_ms: 60000, definition: { every_ms: 60000, anchor_ms: 0, jitter_ms: 0, catch_up: 'latest', target: 'http://h/', queue: 'default', payload_base64: '' } };
  const head = encodeScheduleHeader(scheduleFileMagic, 3, 1, 1);
  const section = encodeScheduleSection([entry]);
  const marks = encodeScheduleMarks(4, 3, Float64Array.of(120000));
  assert.deepEqual([...head], hex('46 52 4d 54 53 43 48 0a 01 00 18 00 03 00 00 00 01 00 00 00 01 00 00 00'));
  assert.equal(
    new TextDecoder().decode(section),
    '[{"name":"s","created_at_ms":0,"updated_at_ms":0,"paused":false,"mark_ms":60000,"definition":{"every_ms":60000,"anchor_ms":0,"jitter_ms":0,"catch_up":"latest","target":"http://h/","queue":"default","payload_base64":""}}]',
  );
  assert.deepEqual([...marks], hex('46 52 4d 54 53 4d 4b 0a 01 00 18 00 04 00 00 00 01 00 00 00 03 00 00 00 00 00 00 00 00 4c fd 40'));
  const meta: ScheduleFileMeta = { fileId: 3, rows: 1, bytes: 244, headCrc32: 3125062780, sections: [[1, 220, 3515776926]], marks: { fileId: 4, bytes: 32, crc32: 4292169246 } };
  assert.deepEqual([crc32(head), crc32(section), crc32(marks), head.length + section.length], [meta.headCrc32, 3515776926, meta.marks?.crc32, meta.bytes]);
  const dir = freshDir();
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, scheduleFileName(3)), Buffer.concat([head, section]));
  writeFileSync(join(dir, scheduleMarksFileName(4)), marks);
  const read: ManifestSchedule[] = [];
  await readScheduleFile(nodeFileSystem, dir, meta, (entries) => read.push(...entries));
  assert.deepEqual(read, [{ ...entry, mark_ms: 120000 }]);
  // A marks file of another schedules file is refused, naming it.
  writeFileSync(join(dir, scheduleMarksFileName(4)), encodeScheduleMarks(4, 9, Float64Array.of(120000)));
  await assert.rejects(readScheduleFile(nodeFileSystem, dir, { ...meta, marks: { fileId: 4, bytes: 32, crc32: crc32(encodeScheduleMarks(4, 9, Float64Array.of(120000))) } }, () => {}), (err) => {
    return isFermataError(err, errorCodes.spillCorrupt) && err.details.file === scheduleMarksFileName(4) && err.details.offset === 20;
  });
});

test('a manifest naming schedules files is refused when an id is not below nextRunId or is a run\'s, or when they are inline too', async () => {
  const dataDir = freshDir();
  const engine = await Engine.open({ dataDir, clock: new ManualClock(t0) });
  await engine.putSchedule('s', everyMinute());
  await engine.checkpoint();
  await engine.close();
  const manifest = await manifestOf(dataDir);
  const meta = manifest.scheduleFile;
  assert.ok(meta !== undefined);
  assert.deepEqual(decodeManifest(encodeManifest(manifest)).scheduleFile, meta, 'round-trips');
  const refused = (changed: Partial<Manifest>, why: RegExp): void => {
    assert.throws(() => encodeManifest({ ...manifest, ...changed }), why);
  };
  refused({ scheduleFile: { ...meta, fileId: manifest.nextRunId } }, /schedules file \d+ is named twice or not below nextRunId/);
  refused({ scheduleFile: { ...meta, fileId: manifest.residentRun.runId } }, /schedules file \d+ is named twice/);
  refused({ schedules: [{ name: 's', created_at_ms: t0, updated_at_ms: t0, paused: false, mark_ms: t0, definition: {} }] }, /both inline and in a schedules file/);
  refused({ scheduleFile: { ...meta, rows: meta.rows + 1 } }, /do not add up/);
});

/**
 * Opens the engine while a setImmediate chain counts, turn by turn of the event loop, the
 * schedules restored (ScheduleBook.restore) and taken up by the materializer (ScheduleBook.take,
 * once a schedule looked at): the most of each in one turn, and the totals.
 */
async function openCountingPerTurn(dataDir: string, clock: ManualClock): Promise<{ engine: Engine; restored: number; taken: number; restoredPerTurnMax: number; takenPerTurnMax: number }> {
  const counts = { restored: 0, taken: 0, restoredPerTurnMax: 0, takenPerTurnMax: 0 };
  let restoredAtTurn = 0;
  let takenAtTurn = 0;
  const { restore, take } = ScheduleBook.prototype;
  ScheduleBook.prototype.restore = function (this: ScheduleBook, ...args: Parameters<ScheduleBook['restore']>) {
    counts.restored++;
    return restore.apply(this, args);
  };
  ScheduleBook.prototype.take = function (this: ScheduleBook, slot: number) {
    counts.taken++;
    take.call(this, slot);
  };
  let counting = true;
  const tick = (): void => {
    counts.restoredPerTurnMax = Math.max(counts.restoredPerTurnMax, counts.restored - restoredAtTurn);
    counts.takenPerTurnMax = Math.max(counts.takenPerTurnMax, counts.taken - takenAtTurn);
    restoredAtTurn = counts.restored;
    takenAtTurn = counts.taken;
    if (counting) setImmediate(tick);
  };
  setImmediate(tick);
  try {
    const engine = await Engine.open({ dataDir, clock });
    tick();
    return { engine, ...counts };
  } finally {
    counting = false;
    Object.assign(ScheduleBook.prototype, { restore, take });
  }
}

test('100,000 schedules are restored and looked at over many turns of the event loop, inline and from a file', async () => {
  const count = 100_000;
  const dataDir = freshDir();
  const clock = new ManualClock(t0);
  let engine = await Engine.open({ dataDir, clock });
  await engine.checkpoint();
  await engine.close();
  // Each with its next occurrence created already (the mark an hour ahead): at open the
  // materializer looks at every one and creates nothing, so nothing else gives the loop a turn.
  const definition = definitionJson({ everyMs: hour, anchorMs: t0, jitterMs: 0, catchUp: 'latest', target: timer.target, queue: timer.queue, payload: timer.payload, headers: '' });
  const schedules: ManifestSchedule[] = Array.from({ length: count }, (_, i) => ({ name: `s${i}`, created_at_ms: t0, updated_at_ms: t0, paused: false, mark_ms: t0 + hour, definition }));
  const manifest = await manifestOf(dataDir);
  writeFileSync(join(dataDir, 'spill', 'MANIFEST'), encodeManifest({ ...manifest, schedules }));

  let opened = await openCountingPerTurn(dataDir, clock);
  engine = opened.engine;
  assert.equal(engine.stats().schedules.count, count);
  assert.equal(engine.stats().schedules.occurrencesCreated, 0);
  // A turn at least every 1,024 restored (a section) and every 512 looked at (schedulesPerTurnMax; a schedule is taken once or twice).
  const sliced = (what: string): void => {
    assert.ok(opened.restored === count && opened.taken >= count, `${what}: every schedule restored and looked at`);
    assert.ok(opened.restoredPerTurnMax <= 1024 && opened.takenPerTurnMax <= 2 * 512, `${what}: at most ${opened.restoredPerTurnMax} restored and ${opened.takenPerTurnMax} looked at in one turn`);
  };
  sliced('inline');
  await engine.checkpoint();
  assert.equal((await manifestOf(dataDir)).scheduleFile?.rows, count);
  await engine.close();

  opened = await openCountingPerTurn(dataDir, clock);
  engine = opened.engine;
  assert.equal(engine.stats().schedules.count, count);
  assert.equal(engine.schedule('s99999')?.definition.everyMs, hour);
  sliced('from a file');
  await engine.close();
});
