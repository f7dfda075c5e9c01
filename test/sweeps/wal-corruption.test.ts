// Damage the recovery must catch: bit flips and overwrites in sealed segments (always
// refused), flips in the last segment (refused whenever a later commit group follows; only
// the last group may be cut), and hostile length fields (an answer in bounded time and memory).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { Wal } from '../../engine/wal/wal.ts';
import { searchLaterGroups } from '../../engine/wal/decoder.ts';
import { buildLog, imageWith, walDir, type BuiltLog } from '../helpers/wal-image.ts';
import { Prng } from '../helpers/prng.ts';


/** Two or more segments of about 8 KiB, in groups of 1–4 records of 1–300 bytes. */
async function multiSegmentLog(seed: number): Promise<BuiltLog> {
  const prng = new Prng(seed);
  const groups = Array.from({ length: 60 }, () => Array.from({ length: 1 + prng.below(4) }, () => 1 + prng.below(300)));
  const log = await buildLog(groups, 8 * 1024, seed);
  assert.ok(log.files.size >= 3, 'the fixture spans several segments');
  return log;
}

type Outcome = { refused: true; file: string; offset: number } | { refused: false; lastSeq: number };

async function openImage(files: Map<string, Uint8Array>): Promise<Outcome> {
  const fs = await imageWith(files);
  try {
    const wal = await Wal.open({ dir: walDir, fs });
    const lastSeq = wal.lastSeq;
    await wal.close();
    return { refused: false, lastSeq };
  } catch (err) {
    if (!isFermataError(err, errorCodes.walCorrupt)) throw err;
    return { refused: true, file: String(err.details.file), offset: Number(err.details.offset) };
  }
}

function damaged(log: BuiltLog, name: string, mutate: (bytes: Uint8Array) => void): Map<string, Uint8Array> {
  const files = new Map(log.files);
  const bytes = (files.get(name) as Uint8Array).slice();
  mutate(bytes);
  files.set(name, bytes);
  return files;
}

test('10,000 single-bit flips and 1,000 overwrites in a sealed segment are all refused, naming the file', { timeout: 300_000 }, async () => {
  const log = await multiSegmentLog(7);
  const sealed = [...log.files.keys()][0] as string;
  const size = (log.files.get(sealed) as Uint8Array).length;
  const prng = new Prng(11);
  for (let i = 0; i < 10_000; i++) {
    const bit = prng.below(size * 8);
    const outcome = await openImage(damaged(log, sealed, (bytes) => (bytes[bit >> 3] = (bytes[bit >> 3] as number) ^ (1 << (bit & 7)))));
    assert.ok(outcome.refused, `flip of bit ${bit} in ${sealed} went undetected`);
    assert.ok(outcome.file.endsWith(sealed), `the refusal names ${outcome.file}`);
  }
  for (let i = 0; i < 1_000; i++) {
    const length = 1 + prng.below(64);
    const at = prng.below(size - length);
    const outcome = await openImage(
      damaged(log, sealed, (bytes) => {
        for (let j = at; j < at + length; j++) bytes[j] = ((bytes[j] as number) + 1 + prng.below(255)) & 0xff;
      }),
    );
    assert.ok(outcome.refused, `overwrite of ${length} bytes at ${at} went undetected`);
    assert.ok(outcome.file.endsWith(sealed));
  }
});

test('flips in the last segment: refused when a later group follows, otherwise only the last group is cut', { timeout: 300_000 }, async () => {
  const log = await multiSegmentLog(8);
  const names = [...log.files.keys()];
  const last = names.at(-1) as string;
  const bytes = log.files.get(last) as Uint8Array;
  const ends = log.recordEnds.get(last) as number[];
  // Records of the last group: the fixture's groups are rebuilt from the index-in-group field.
  const starts = [32, ...ends.slice(0, -1)];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const lastGroupStart = starts.findLast((start) => view.getUint32(start + 24, true) === 0) as number;
  const firstSeqInSegment = log.bodies.length - ends.length + 1;
  const lastGroupFirstSeq = firstSeqInSegment + starts.indexOf(lastGroupStart);
  const prng = new Prng(12);
  let refused = 0;
  let cut = 0;
  for (let i = 0; i < 3_000; i++) {
    const bit = prng.below(bytes.length * 8);
    const byte = bit >> 3;
    const outcome = await openImage(damaged(log, last, (b) => (b[byte] = (b[byte] as number) ^ (1 << (bit & 7)))));
    if (byte < lastGroupStart) {
      assert.ok(outcome.refused, `flip at byte ${byte}, before the last group, must refuse to start`);
      assert.ok(outcome.file.endsWith(last));
      refused++;
    } else {
      assert.ok(!outcome.refused, `flip at byte ${byte} in the last group is a torn tail`);
      assert.ok(outcome.lastSeq >= lastGroupFirstSeq - 1 && outcome.lastSeq < log.bodies.length, `flip at ${byte}: kept ${outcome.lastSeq}`);
      cut++;
    }
  }
  assert.ok(refused > 0 && cut > 0, `both cases were exercised (${refused} refused, ${cut} cut)`);
});

test('hostile length fields get an answer in bounded time and memory', { timeout: 60_000 }, async () => {
  const log = await multiSegmentLog(9);
  const names = [...log.files.keys()];
  for (const name of [names[0] as string, names.at(-1) as string]) {
    const ends = log.recordEnds.get(name) as number[];
    for (const which of ['middle', 'last'] as const) {
      const start = which === 'middle' ? (ends[Math.floor(ends.length / 2) - 1] as number) : (ends.at(-2) as number);
      for (const length of [0, 2 ** 30, 2 ** 30 + 1, 2 ** 32 - 1]) {
        const before = process.memoryUsage().arrayBuffers;
        const began = performance.now();
        const outcome = await openImage(damaged(log, name, (b) => new DataView(b.buffer, b.byteOffset).setUint32(start + 4, length, true)));
        const tookMs = performance.now() - began;
        const grewBytes = process.memoryUsage().arrayBuffers - before;
        const context = `length ${length} in the ${which} record of ${name}`;
        assert.ok(tookMs < 5_000, `${context}: ${tookMs} ms`);
        assert.ok(grewBytes < 64 * 1024 * 1024, `${context}: grew ${grewBytes} bytes`);
        const sealed = name !== names.at(-1);
        if (sealed || which === 'middle') assert.ok(outcome.refused, `${context} must refuse to start`);
        else assert.ok(!outcome.refused && outcome.lastSeq === log.bodies.length - 1, `${context}: only the last record is cut`);
      }
    }
  }
});

test('quadratic-tail-scan: a torn tail full of fake headers is judged within a bounded checksum budget', () => {
  const size = 4 * 1024 * 1024;
  const bytes = new Uint8Array(size);
  const view = new DataView(bytes.buffer);
  // Every 32 bytes a plausible header (segment 1, sequence 10, a length reaching the end): each one costs a checksum over the rest.
  for (let offset = 64; offset + 32 <= size; offset += 32) {
    view.setUint32(offset + 4, size - offset - 32, true);
    view.setUint32(offset + 8, 10, true);
    view.setUint32(offset + 16, 1, true);
  }
  const started = performance.now();
  assert.equal(searchLaterGroups(bytes, 33, 1, 5, { excuseOverlapped: true }).verdict, 'too-costly');
  assert.ok(performance.now() - started < 20_000, 'bounded, not quadratic (it took 80 s before the budget)');
});
