// The WAL truncation sweep (wal-truncation.test.ts says what it checks): a plain function, run
// by the test in a worker thread (test/helpers/off-harness.ts), away from the test runner's
// async hook, which cost it about half its CPU.
import assert from 'node:assert/strict';
import { Wal } from '../../engine/wal/wal.ts';
import { buildLog, imageWith, walDir } from '../helpers/wal-image.ts';
import { Prng } from '../helpers/prng.ts';

const sectorBytes = 512;
const tails = ['absent', 'zeros', 'random', 'stale-record', 'zeroed-sector'] as const;
type Tail = (typeof tails)[number];

function groupsOfAbout(totalBytes: number, prng: Prng): number[][] {
  const groups: number[][] = [];
  let bytes = 0;
  while (bytes < totalBytes) {
    const group = Array.from({ length: 1 + prng.below(4) }, () => 1 + prng.below(700));
    for (const size of group) bytes += 32 + size;
    groups.push(group);
  }
  return groups;
}

function withTail(original: Uint8Array, cut: number, tail: Tail, staleFrame: Uint8Array, noise: Uint8Array): Uint8Array {
  const fill = Math.max(original.length - cut, sectorBytes);
  switch (tail) {
    case 'absent':
      return original.slice(0, cut);
    case 'zeros':
      return concat(original.subarray(0, cut), new Uint8Array(fill));
    case 'random':
      return concat(original.subarray(0, cut), noise.subarray(cut % sectorBytes, cut % sectorBytes + fill));
    case 'stale-record':
      return concat(original.subarray(0, cut), staleFrame);
    case 'zeroed-sector': {
      const image = original.slice(0, cut);
      const sector = Math.floor(Math.max(cut - 1, 0) / sectorBytes) * sectorBytes;
      image.fill(0, Math.max(sector, 32), Math.min(sector + sectorBytes, cut));
      return image;
    }
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/** How many leading records are complete and untouched in `image`. */
function intactPrefix(original: Uint8Array, image: Uint8Array, ends: readonly number[]): number {
  let start = 32;
  let count = 0;
  for (const end of ends) {
    if (end > image.length || !Buffer.from(image.subarray(start, end)).equals(original.subarray(start, end))) break;
    count++;
    start = end;
  }
  return count;
}

/** Every byte-truncation of a last segment of about `segmentBytes` × the five tails. */
export async function truncationSweep(segmentBytes: number): Promise<void> {
  const prng = new Prng(64);
  const log = await buildLog(groupsOfAbout(segmentBytes, prng), 1 << 20);
  assert.equal(log.files.size, 1);
  const [name, original] = [...log.files][0] as [string, Uint8Array];
  const ends = log.recordEnds.get(name) as number[];
  const staleFrame = original.slice(32, ends[0]);
  const noise = prng.bytes(original.length + 2 * sectorBytes);
  const verifyStride = 97; // full append-and-reopen check on every 97th cut; the recovery verdict on all
  let checked = 0;
  for (let cut = 0; cut <= original.length; cut++) {
    for (const tail of tails) {
      const image = withTail(original, cut, tail, staleFrame, noise);
      const fs = await imageWith(new Map([[name, image]]));
      const expected = cut < 32 ? undefined : intactPrefix(original, image, ends);
      const wal = await Wal.open({ dir: walDir, fs });
      const context = `cut ${cut}, tail ${tail}`;
      if (expected === undefined) {
        assert.equal(wal.lastSeq, 0, `${context}: a torn segment header leaves an empty log`);
      } else {
        assert.equal(wal.lastSeq, expected, context);
      }
      if (cut % verifyStride === 0 || cut === original.length) {
        const seq = await wal.append(9, Uint8Array.of(1, 2, 3));
        assert.equal(seq, wal.lastSeq, context);
        await wal.close();
        const again = await Wal.open({ dir: walDir, fs });
        assert.equal(again.recovery.repair, undefined, `${context}: the second open repairs nothing`);
        let last: Uint8Array | undefined;
        let count = 0;
        for await (const record of again.records()) {
          count++;
          last = record.body;
          if (record.seq < seq) assert.deepEqual(record.body, log.bodies[record.seq - 1], `${context}: record ${record.seq}`);
        }
        assert.equal(count, seq, context);
        assert.deepEqual(last, Uint8Array.of(1, 2, 3), context);
        await again.close();
      } else {
        await wal.close();
      }
      checked++;
    }
  }
  assert.equal(checked, (original.length + 1) * tails.length);
}
