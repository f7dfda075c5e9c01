// Proves the simulated file system forgets exactly what a real disk may forget at a power
// loss (and nothing that was synced), so WAL crash tests built on it mean something.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import type { FileHandle } from '../../engine/fs/file-system.ts';
import { type PowerLossMode, SimFileSystem } from '../sim/sim-file-system.ts';

const seeds = Array.from({ length: 200 }, (_, index) => index + 1);

function filled(length: number, value: number): Uint8Array {
  return new Uint8Array(length).fill(value);
}

/** Byte i is never zero and differs from its neighbours, so a misplaced or missing byte shows. */
function pattern(length: number): Uint8Array {
  return Uint8Array.from({ length }, (_, index) => (index % 251) + 1);
}

/** A directory `/d` holding an empty file `/d/f` whose name and (empty) data are durable. */
async function durableEmptyFile(seed: number): Promise<{ fs: SimFileSystem; handle: FileHandle }> {
  const fs = new SimFileSystem({ seed });
  await fs.mkdirp('/d');
  const handle = await fs.open('/d/f', 'create');
  await fs.syncDir('/d');
  await handle.datasync();
  return { fs, handle };
}

async function exists(fs: SimFileSystem, path: string): Promise<boolean> {
  const slash = path.lastIndexOf('/');
  return (await fs.list(path.slice(0, slash) || '/')).includes(path.slice(slash + 1));
}

/** Every file under `dir` with its bytes, names sorted: a comparable picture of the disk. */
async function image(fs: SimFileSystem, dir = '/'): Promise<Record<string, number[]>> {
  const result: Record<string, number[]> = {};
  for (const name of (await fs.list(dir)).sort()) {
    const path = dir === '/' ? `/${name}` : `${dir}/${name}`;
    try {
      result[path] = [...(await fs.readFile(path))];
    } catch (err) {
      assert.equal((err as { code?: unknown }).code, 'EISDIR');
      Object.assign(result, await image(fs, path));
    }
  }
  return result;
}

describe('SimFileSystem current view', () => {
  it('reads see unsynced writes in order, with holes as zeros', async () => {
    const { fs, handle } = await durableEmptyFile(1);
    await handle.writev([filled(4, 1), filled(2, 2)], 0);
    await handle.writev([filled(2, 3)], 2);
    await handle.writev([filled(1, 9)], 10);
    assert.deepEqual([...(await fs.readFile('/d/f'))], [1, 1, 3, 3, 2, 2, 0, 0, 0, 0, 9]);
    assert.equal(await handle.size(), 11);
    const into = new Uint8Array(8);
    assert.equal(await handle.read(into, 6), 5);
    assert.deepEqual([...into], [0, 0, 0, 0, 9, 0, 0, 0]);
    assert.equal(await handle.read(into, 11), 0);
    assert.deepEqual(fs.durableBytes('/d/f'), new Uint8Array(0));
  });

  it('truncate shrinks and grows the current view and is durable only after datasync', async () => {
    const { fs, handle } = await durableEmptyFile(1);
    await handle.writev([filled(8, 7)], 0);
    await handle.datasync();
    await handle.truncate(3);
    await handle.truncate(5);
    assert.deepEqual([...(await fs.readFile('/d/f'))], [7, 7, 7, 0, 0]);
    assert.deepEqual(fs.durableBytes('/d/f'), filled(8, 7));
    await handle.datasync();
    assert.deepEqual(fs.durableBytes('/d/f'), Uint8Array.from([7, 7, 7, 0, 0]));
    const after = fs.powerLoss({ mode: 'keep-none' });
    assert.deepEqual([...(await after.readFile('/d/f'))], [7, 7, 7, 0, 0]);
  });

  it('rejects with errno-coded Errors that name the op and the path', async () => {
    const fs = new SimFileSystem({ seed: 1 });
    const open = fs.open('/nope/f', 'create');
    await assert.rejects(open, (err: unknown) => {
      assert.ok(err instanceof Error);
      assert.equal((err as { code?: unknown }).code, 'ENOENT');
      assert.match(err.message, /open '\/nope\/f'/);
      return true;
    });
    await fs.mkdirp('/d');
    await assert.rejects(fs.open('/d/f', 'read'), { code: 'ENOENT' });
    await (await fs.open('d/f', 'create')).close();
    await assert.rejects(fs.open('/d/./f', 'create'), { code: 'EEXIST' });
    await assert.rejects(fs.open('/d', 'read'), { code: 'EISDIR' });
    await assert.rejects(fs.open('/d/f/g', 'create'), { code: 'ENOTDIR' });
    await assert.rejects(fs.list('/d/f'), { code: 'ENOTDIR' });
    await assert.rejects(fs.mkdirp('/d/f'), { code: 'EEXIST' });
    await assert.rejects(fs.unlink('/d/g'), { code: 'ENOENT' });
    await assert.rejects(fs.rename('/d/g', '/d/h'), { code: 'ENOENT' });
  });

  it('rejects writes through read-only or closed handles with EBADF', async () => {
    const { fs, handle } = await durableEmptyFile(1);
    const reader = await fs.open('/d/f', 'read');
    await assert.rejects(reader.writev([filled(1, 1)], 0), { code: 'EBADF' });
    await assert.rejects(reader.truncate(0), { code: 'EBADF' });
    await handle.close();
    await assert.rejects(handle.writev([filled(1, 1)], 0), { code: 'EBADF' });
    await assert.rejects(handle.size(), { code: 'EBADF' });
    assert.equal((await fs.readFile('/d/f')).length, 0);
  });

  it('keeps a handle working on an unlinked file, like a POSIX inode', async () => {
    const { fs, handle } = await durableEmptyFile(1);
    await fs.unlink('/d/f');
    await handle.writev([filled(3, 5)], 0);
    await handle.datasync();
    assert.equal(await handle.size(), 3);
    assert.deepEqual(await fs.list('/d'), []);
    await assert.rejects(fs.readFile('/d/f'), { code: 'ENOENT' });
  });

  it('renames atomically in the current view, replacing the target', async () => {
    const fs = new SimFileSystem({ seed: 1 });
    await fs.mkdirp('/a/b');
    await (await fs.open('/a/x', 'create')).writev([filled(1, 1)], 0);
    await (await fs.open('/a/b/y', 'create')).writev([filled(1, 2)], 0);
    await fs.rename('/a/x', '/a/b/y');
    assert.deepEqual((await fs.list('/a')).sort(), ['b']);
    assert.deepEqual([...(await fs.readFile('/a/b/y'))], [1]);
    await assert.rejects(fs.rename('/a/b/y', '/a/b'), { code: 'EISDIR' });
  });

  it('completes every call asynchronously, and shakes the order of concurrent calls', async () => {
    const { handle } = await durableEmptyFile(1);
    let settled = false;
    const write = handle.writev([filled(1, 1)], 0).then(() => {
      settled = true;
    });
    assert.equal(settled, false);
    await write;
    assert.equal(settled, true);
    const sizesSeen = new Set<number>();
    for (const seed of seeds.slice(0, 50)) {
      const { handle: other } = await durableEmptyFile(seed);
      const [, size] = await Promise.all([other.writev([filled(1, 1)], 0), other.size()]);
      sizesSeen.add(size);
    }
    assert.deepEqual([...sizesSeen].sort(), [0, 1]);
  });

  it('keeps mkdirp durable at once', async () => {
    const fs = new SimFileSystem({ seed: 1 });
    await fs.mkdirp('/a/b/c');
    await fs.mkdirp('/a/b/c');
    const after = fs.powerLoss({ mode: 'keep-none' });
    assert.deepEqual(await after.list('/a/b'), ['c']);
  });
});

describe('SimFileSystem power loss', () => {
  it('loses unsynced writes under keep-none and keeps them under keep-all', async () => {
    for (const mode of ['keep-none', 'keep-all'] as const) {
      const { fs, handle } = await durableEmptyFile(1);
      await handle.writev([pattern(1000)], 0);
      const after = fs.powerLoss({ mode });
      const expected = mode === 'keep-all' ? pattern(1000) : new Uint8Array(0);
      assert.deepEqual(await after.readFile('/d/f'), expected, mode);
      assert.deepEqual(after.durableBytes('/d/f'), expected, mode);
    }
  });

  it('never loses datasynced data (200 seeds)', async () => {
    for (const seed of seeds) {
      const { fs, handle } = await durableEmptyFile(seed);
      const synced = pattern(3000);
      await handle.writev([synced.subarray(0, 1000)], 0);
      await handle.writev([synced.subarray(1000)], 1000);
      await handle.datasync();
      for (let index = 0; index < 10; index++) await handle.writev([filled(300, 0xee)], 3000 + index * 300);
      const after = fs.powerLoss();
      const bytes = await after.readFile('/d/f');
      assert.deepEqual(bytes.subarray(0, 3000), synced, `seed ${seed}`);
    }
  });

  it('can forget a create that was not followed by syncDir, even with its data synced', async () => {
    let vanished = 0;
    for (const seed of seeds) {
      const fs = new SimFileSystem({ seed });
      await fs.mkdirp('/d');
      const handle = await fs.open('/d/f', 'create');
      await handle.writev([filled(10, 1)], 0);
      await handle.datasync();
      if (!(await exists(fs.powerLoss(), '/d/f'))) vanished++;
    }
    assert.ok(vanished > 0 && vanished < seeds.length, `vanished in ${vanished} of ${seeds.length}`);
    const fs = new SimFileSystem({ seed: 1 });
    await fs.mkdirp('/d');
    await fs.open('/d/f', 'create');
    assert.equal(await exists(fs.powerLoss({ mode: 'keep-none' }), '/d/f'), false);
  });

  it('can undo an unlink that was not followed by syncDir, bringing back the durable data', async () => {
    const outcomes = new Set<string>();
    for (const seed of seeds) {
      const { fs, handle } = await durableEmptyFile(seed);
      await handle.writev([filled(10, 4)], 0);
      await handle.datasync();
      await fs.unlink('/d/f');
      const after = fs.powerLoss();
      if (await exists(after, '/d/f')) {
        assert.deepEqual(await after.readFile('/d/f'), filled(10, 4));
        outcomes.add('undone');
      } else {
        outcomes.add('kept');
      }
    }
    assert.deepEqual([...outcomes].sort(), ['kept', 'undone']);
  });

  it('keeps rename atomic: the target holds the old or the new file, and the source goes with it (200 seeds)', async () => {
    const outcomes = new Set<string>();
    for (const seed of seeds) {
      const fs = new SimFileSystem({ seed });
      await fs.mkdirp('/d');
      const old = await fs.open('/d/target', 'create');
      await old.writev([filled(600, 1)], 0);
      await old.datasync();
      await fs.syncDir('/d');
      const fresh = await fs.open('/d/tmp', 'create');
      await fresh.writev([filled(700, 2)], 0);
      await fresh.datasync();
      await fs.syncDir('/d');
      await fs.rename('/d/tmp', '/d/target');
      const after = fs.powerLoss();
      const target = await after.readFile('/d/target');
      const tmpExists = await exists(after, '/d/tmp');
      if (target[0] === 2) {
        assert.deepEqual(target, filled(700, 2), `seed ${seed}`);
        assert.equal(tmpExists, false, `seed ${seed}: both names hold the new file`);
        outcomes.add('new');
      } else {
        assert.deepEqual(target, filled(600, 1), `seed ${seed}`);
        assert.equal(tmpExists, true, `seed ${seed}: the new file vanished`);
        outcomes.add('old');
      }
    }
    assert.deepEqual([...outcomes].sort(), ['new', 'old']);
  });

  it('makes a rename durable once the directory is synced', async () => {
    for (const seed of seeds.slice(0, 50)) {
      const fs = new SimFileSystem({ seed });
      await fs.mkdirp('/d');
      const handle = await fs.open('/d/tmp', 'create');
      await handle.writev([filled(5, 3)], 0);
      await handle.datasync();
      await fs.rename('/d/tmp', '/d/final');
      await fs.syncDir('/d');
      const after = fs.powerLoss();
      assert.deepEqual(await after.list('/d'), ['final']);
      assert.deepEqual(await after.readFile('/d/final'), filled(5, 3));
    }
  });

  it('tears unsynced writes only at sector boundaries, and the file ends where an applied piece ends', async () => {
    const position = 100;
    const written = pattern(2000);
    const pieces = [
      [100, 512],
      [512, 1024],
      [1024, 1536],
      [1536, 2048],
      [2048, 2100],
    ] as const;
    let torn = 0;
    for (const seed of seeds) {
      const { fs, handle } = await durableEmptyFile(seed);
      await handle.writev([written], position);
      const bytes = await fs.powerLoss().readFile('/d/f');
      let applied = 0;
      let end = 0;
      for (const [start, stop] of pieces) {
        const expected = written.subarray(start - position, stop - position);
        const actual = bytes.subarray(start, stop);
        if (actual.length === expected.length && actual.every((byte, index) => byte === expected[index])) {
          applied++;
          end = stop;
        } else {
          assert.ok(actual.every((byte) => byte === 0), `seed ${seed}: piece ${start}..${stop} is partly written`);
        }
      }
      assert.ok(bytes.subarray(0, position).every((byte) => byte === 0), `seed ${seed}`);
      assert.equal(bytes.length, end, `seed ${seed}: length is not the end of the last applied piece`);
      if (applied > 0 && applied < pieces.length) torn++;
    }
    assert.ok(torn > 0, 'no seed tore the write');
  });

  it('tears at the configured sector size', async () => {
    let torn = 0;
    for (const seed of seeds) {
      const fs = new SimFileSystem({ seed, sectorBytes: 4096 });
      await fs.mkdirp('/d');
      const handle = await fs.open('/d/f', 'create');
      await fs.syncDir('/d');
      await handle.writev([filled(8192, 1)], 0);
      const bytes = await fs.powerLoss().readFile('/d/f');
      assert.ok([0, 4096, 8192].includes(bytes.length), `seed ${seed}: length ${bytes.length}`);
      if (bytes.length === 4096 || bytes.subarray(0, 4096).every((byte) => byte === 0)) torn++;
    }
    assert.ok(torn > 0, 'no seed tore the write');
  });

  it('reorders: a later unsynced write can land while an earlier one does not', async () => {
    let reordered = 0;
    for (const seed of seeds) {
      const { fs, handle } = await durableEmptyFile(seed);
      await handle.writev([filled(512, 1)], 0);
      await handle.writev([filled(512, 2)], 512);
      const bytes = await fs.powerLoss().readFile('/d/f');
      if (bytes.length === 1024 && bytes[0] === 0 && bytes[512] === 2) reordered++;
    }
    assert.ok(reordered > 0, 'a later write never landed without the earlier one');
  });

  it('reorders within a sector: an earlier write can land on top of a later one', async () => {
    let reordered = 0;
    for (const seed of seeds) {
      const { fs, handle } = await durableEmptyFile(seed);
      await handle.writev([filled(200, 1)], 0);
      await handle.writev([filled(200, 2)], 100);
      const bytes = await fs.powerLoss().readFile('/d/f');
      // Byte 150 from the first write and byte 250 from the second: both landed, first last.
      if (bytes[150] === 1 && bytes[250] === 2) reordered++;
    }
    assert.ok(reordered > 0, 'writes always landed in call order');
  });

  it('never lands a write after a later truncate that cut it', async () => {
    const outcomes = new Set<string>();
    for (const seed of seeds) {
      const { fs, handle } = await durableEmptyFile(seed);
      await handle.writev([filled(512, 9)], 0);
      await handle.datasync();
      await handle.writev([filled(512, 1)], 512);
      await handle.truncate(256);
      const bytes = [...(await fs.powerLoss().readFile('/d/f'))];
      const legal = [[...filled(512, 9)], [...filled(512, 9), ...filled(512, 1)], [...filled(256, 9)]];
      assert.ok(legal.some((outcome) => JSON.stringify(outcome) === JSON.stringify(bytes)), `seed ${seed}`);
      outcomes.add(JSON.stringify(bytes));
    }
    assert.equal(outcomes.size, 3);
  });

  it('keeps directory ops on one name in order: a lost create takes the later rename of that name with it', async () => {
    for (const seed of seeds) {
      const fs = new SimFileSystem({ seed });
      await fs.mkdirp('/d');
      const handle = await fs.open('/d/a', 'create');
      await handle.writev([filled(3, 8)], 0);
      await handle.datasync();
      await fs.rename('/d/a', '/d/b');
      const names = (await fs.powerLoss().list('/d')).sort();
      assert.ok(['', 'a', 'b'].includes(names.join()), `seed ${seed}: ${names.join()}`);
    }
  });

  it('makes a cross-directory rename durable only when both directories are synced, with the ops it depends on', async () => {
    const fs = new SimFileSystem({ seed: 1 });
    await fs.mkdirp('/a');
    await fs.mkdirp('/b');
    await fs.mkdirp('/c');
    const handle = await fs.open('/c/z', 'create');
    await handle.writev([filled(2, 6)], 0);
    await handle.datasync();
    await fs.syncDir('/c');
    await fs.rename('/c/z', '/b/y');
    await fs.rename('/b/y', '/a/x');
    await fs.syncDir('/a');
    assert.deepEqual(await image(fs.powerLoss({ mode: 'keep-none' })), { '/c/z': [6, 6] });
    // (That instance is dead now; replay the calls on a fresh one.)
    const again = new SimFileSystem({ seed: 1 });
    for (const dir of ['/a', '/b', '/c']) await again.mkdirp(dir);
    const second = await again.open('/c/z', 'create');
    await second.writev([filled(2, 6)], 0);
    await second.datasync();
    await again.syncDir('/c');
    await again.rename('/c/z', '/b/y');
    await again.rename('/b/y', '/a/x');
    await again.syncDir('/a');
    await again.syncDir('/b');
    // The second rename is synced in both its directories; it drags the first (same name /b/y)
    // with it, so the file has exactly one name and never two.
    assert.deepEqual(await image(again.powerLoss({ mode: 'keep-none' })), { '/a/x': [6, 6] });
  });

  it('never lets a later op on a name land without the earlier ones: the moved-away file cannot vanish', async () => {
    const outcomes = new Set<string>();
    for (const seed of seeds) {
      const fs = new SimFileSystem({ seed });
      await fs.mkdirp('/d');
      const old = await fs.open('/d/a', 'create');
      await old.writev([filled(3, 1)], 0);
      await old.datasync();
      await fs.syncDir('/d');
      await fs.rename('/d/a', '/d/b');
      const fresh = await fs.open('/d/a', 'create');
      await fresh.writev([filled(3, 2)], 0);
      await fresh.datasync();
      const picture = JSON.stringify(await image(fs.powerLoss()));
      const legal = [{ '/d/a': [1, 1, 1] }, { '/d/b': [1, 1, 1] }, { '/d/a': [2, 2, 2], '/d/b': [1, 1, 1] }];
      assert.ok(legal.some((outcome) => JSON.stringify(outcome) === picture), `seed ${seed}: ${picture}`);
      outcomes.add(picture);
    }
    assert.equal(outcomes.size, 3);
  });

  it('can lose or keep an unsynced truncate', async () => {
    const lengths = new Set<number>();
    for (const seed of seeds.slice(0, 50)) {
      const { fs, handle } = await durableEmptyFile(seed);
      await handle.writev([filled(10, 1)], 0);
      await handle.datasync();
      await handle.truncate(4);
      const bytes = await fs.powerLoss().readFile('/d/f');
      assert.deepEqual(bytes, filled(bytes.length, 1), `seed ${seed}`);
      lengths.add(bytes.length);
    }
    assert.deepEqual([...lengths].sort(), [10, 4]);
  });

  it('gives the new instance a current view equal to its durable view, and no pending state', async () => {
    const { fs, handle } = await durableEmptyFile(3);
    await handle.writev([pattern(5000)], 0);
    await fs.open('/d/g', 'create');
    const after = fs.powerLoss();
    const before = await image(after);
    assert.deepEqual(after.durableBytes('/d/f'), await after.readFile('/d/f'));
    assert.deepEqual(await image(after.powerLoss({ mode: 'keep-none' })), before);
  });

  it('kills the old instance: later calls and calls in flight reject with EIO and change nothing', async () => {
    const { fs, handle } = await durableEmptyFile(7);
    await handle.writev([filled(10, 1)], 0);
    await handle.datasync();
    const inFlight = [
      handle.writev([filled(10, 2)], 0),
      handle.truncate(0),
      fs.open('/d/g', 'create'),
      fs.unlink('/d/f'),
      fs.mkdirp('/e'),
    ];
    const after = fs.powerLoss({ mode: 'keep-all' });
    for (const call of inFlight) await assert.rejects(call, { code: 'EIO' });
    await assert.rejects(handle.writev([filled(10, 3)], 0), { code: 'EIO' });
    await assert.rejects(handle.close(), { code: 'EIO' });
    await assert.rejects(fs.rename('/d/f', '/d/h'), { code: 'EIO' });
    await assert.rejects(fs.list('/d'), { code: 'EIO' });
    assert.throws(() => fs.powerLoss(), { code: 'EIO' });
    assert.throws(() => fs.corrupt('/d/f', 0, filled(1, 9)), { code: 'EIO' });
    assert.deepEqual(await image(after), { '/d/f': [...filled(10, 1)] });
    assert.deepEqual(await after.list('/'), ['d']);
  });

  it('is deterministic: the same seed and calls give the same image, different seeds differ', async () => {
    const run = async (seed: number): Promise<string> => {
      const fs = new SimFileSystem({ seed });
      await fs.mkdirp('/wal');
      const first = await fs.open('/wal/1', 'create');
      await fs.syncDir('/wal');
      await first.writev([pattern(1500)], 0);
      await first.datasync();
      await Promise.all([first.writev([filled(700, 5)], 1500), first.writev([filled(300, 6)], 2200)]);
      const second = await fs.open('/wal/2.tmp', 'create');
      await second.writev([filled(900, 7)], 0);
      await fs.rename('/wal/2.tmp', '/wal/2');
      await fs.unlink('/wal/1');
      return JSON.stringify(await image(fs.powerLoss()));
    };
    const images = new Set<string>();
    for (const seed of seeds.slice(0, 20)) {
      const once = await run(seed);
      assert.equal(await run(seed), once, `seed ${seed}`);
      images.add(once);
    }
    assert.ok(images.size > 1, 'every seed gave the same image');
  });
});

describe('SimFileSystem faults and helpers', () => {
  it('fails the faulted op with the chosen code and leaves the data untouched', async () => {
    const { fs, handle } = await durableEmptyFile(1);
    fs.setFault((op, path) => (op === 'writev' && path === '/d/f' ? 'EIO' : undefined));
    await assert.rejects(handle.writev([filled(4, 1)], 0), (err: unknown) => {
      assert.ok(err instanceof Error);
      assert.equal((err as { code?: unknown }).code, 'EIO');
      assert.match(err.message, /writev '\/d\/f'/);
      return true;
    });
    assert.equal(await handle.size(), 0);
    fs.setFault(undefined);
    await handle.writev([filled(4, 1)], 0);
    assert.equal(await handle.size(), 4);
  });

  it('failAfter lets count calls through, fails the next one once, and counts every op', async () => {
    const { fs, handle } = await durableEmptyFile(1);
    fs.failAfter('datasync', 1, 'ENOSPC');
    await handle.writev([filled(4, 1)], 0);
    await handle.datasync();
    await handle.writev([filled(4, 2)], 4);
    const before = fs.opCount;
    await assert.rejects(handle.datasync(), { code: 'ENOSPC' });
    assert.equal(fs.opCount, before + 1);
    assert.deepEqual(fs.durableBytes('/d/f'), filled(4, 1));
    await handle.datasync();
    assert.equal(fs.durableBytes('/d/f')?.length, 8);
  });

  it('locks a directory exclusively until released, and a new instance after power loss holds no locks', async () => {
    const fs = new SimFileSystem({ seed: 1 });
    await fs.mkdirp('/data');
    const lock = await fs.lockDir('/data');
    await assert.rejects(fs.lockDir('/data/'), (err: unknown) => isFermataError(err, errorCodes.dataDirLocked));
    await lock.release();
    const again = await fs.lockDir('/data');
    await lock.release();
    await assert.rejects(fs.lockDir('/data'), (err: unknown) => isFermataError(err, errorCodes.dataDirLocked));
    const after = fs.powerLoss();
    await assert.rejects(again.release(), { code: 'EIO' });
    await (await after.lockDir('/data')).release();
  });

  it('corrupt changes both views; durableBytes follows the durable name', async () => {
    const { fs, handle } = await durableEmptyFile(1);
    await handle.writev([filled(8, 1)], 0);
    await handle.datasync();
    fs.corrupt('/d/f', 2, Uint8Array.from([0xff, 0xfe]));
    const expected = Uint8Array.from([1, 1, 0xff, 0xfe, 1, 1, 1, 1]);
    assert.deepEqual(await fs.readFile('/d/f'), expected);
    assert.deepEqual(fs.durableBytes('/d/f'), expected);
    await fs.rename('/d/f', '/d/g');
    assert.equal(fs.durableBytes('/d/g'), undefined);
    assert.deepEqual(fs.durableBytes('/d/f'), expected);
    assert.deepEqual(await fs.powerLoss({ mode: 'keep-none' }).readFile('/d/f'), expected);
  });
});

describe('SimFileSystem write-through handles', () => {
  /** A durable empty `/d/f` and a handle on it opened as `options` say. */
  async function fileWith(seed: number, writeThrough: boolean | undefined, asked: boolean): Promise<{ fs: SimFileSystem; handle: FileHandle }> {
    const fs = new SimFileSystem({ seed, ...(writeThrough === undefined ? {} : { writeThrough }) });
    await fs.mkdirp('/d');
    await (await fs.open('/d/f', 'create')).datasync();
    await fs.syncDir('/d');
    return { fs, handle: await fs.open('/d/f', 'readwrite', { writeThrough: asked }) };
  }

  it('a handle is write-through only when asked for it, on a disk that gives it, and never read-only', async () => {
    assert.equal((await fileWith(1, undefined, true)).handle.writeThrough, true);
    assert.equal((await fileWith(1, undefined, false)).handle.writeThrough, false);
    assert.equal((await fileWith(1, false, true)).handle.writeThrough, false, 'a disk without O_DSYNC');
    const { fs } = await fileWith(1, undefined, true);
    assert.equal((await fs.open('/d/f', 'read', { writeThrough: true })).writeThrough, false);
  });

  it('a write-through writev is durable once it resolves, with no datasync (200 seeds)', async () => {
    for (const seed of seeds) {
      const { fs, handle } = await fileWith(seed, undefined, true);
      await handle.writev([pattern(700), pattern(300)], 0);
      const after = fs.powerLoss({ mode: 'keep-none' });
      assert.deepEqual([...(await after.readFile('/d/f'))], [...pattern(700), ...pattern(300)], `seed ${seed}`);
    }
  });

  it("a fault armed on 'datasync' fails a write-through writev after the write landed, not durable (O_DSYNC's EIO)", async () => {
    const { fs, handle } = await fileWith(1, undefined, true);
    fs.failAfter('datasync', 0, 'EIO');
    await assert.rejects(handle.writev([pattern(100)], 0), { code: 'EIO' });
    assert.deepEqual(await fs.readFile('/d/f'), pattern(100), 'the write is in the current view');
    assert.equal(fs.durableBytes('/d/f')?.length, 0, 'and not durable');
  });

  it('a plain handle on the same disk still needs its datasync', async () => {
    const { fs, handle } = await fileWith(1, undefined, false);
    await handle.writev([pattern(100)], 0);
    assert.equal((await fs.powerLoss({ mode: 'keep-none' }).readFile('/d/f')).length, 0);
  });

  it('a power loss while a write-through writev is in flight may keep it, tear it or lose it, and the writev does not resolve', async () => {
    const outcomes = new Set<string>();
    for (const seed of seeds) {
      const { fs, handle } = await fileWith(seed, undefined, true);
      const bytes = pattern(4096);
      let resolved = false;
      const writing = handle.writev([bytes], 0).then(() => {
        resolved = true;
      });
      writing.catch(() => undefined);
      // A power loss a seeded number of microtask hops into the call.
      for (let hop = seed % 8; hop > 0; hop--) await Promise.resolve();
      const after = fs.powerLoss();
      const kept = await after.readFile('/d/f');
      if (resolved) {
        assert.deepEqual(kept, bytes, `seed ${seed}: resolved, so durable`);
        outcomes.add('resolved');
        continue;
      }
      await assert.rejects(writing, { code: 'EIO' });
      outcomes.add(kept.length === 0 ? 'lost' : kept.every((byte, i) => byte === bytes[i]) && kept.length === bytes.length ? 'kept' : 'torn');
    }
    for (const outcome of ['resolved', 'lost', 'torn']) assert.ok(outcomes.has(outcome), `some power loss left the write ${outcome} (${[...outcomes].join(', ')})`);
  });

  it('a write-through writev makes only its own write durable: another still in flight stays pending, and can be lost or torn (200 seeds)', async () => {
    // Two writes in flight at once on one handle at disjoint offsets; the power goes out as the
    // first call returns. Each seed runs three times, identically up to the power loss, once per
    // mode: keep-none shows the durable view, keep-all the current one.
    const writes = [
      { name: 'first', position: 0, bytes: pattern(1024) },
      { name: 'second', position: 1024, bytes: filled(512, 0xbb) },
    ] as const;
    const run = async (seed: number, mode: PowerLossMode): Promise<{ resolved: string[]; bytes: Uint8Array }> => {
      const { fs, handle } = await fileWith(seed, undefined, true);
      const resolved: string[] = [];
      let after: SimFileSystem | undefined;
      const calls = writes.map(({ name, position, bytes }) =>
        handle.writev([bytes], position).then(() => {
          resolved.push(name);
          after ??= fs.powerLoss({ mode });
        }),
      );
      await Promise.allSettled(calls);
      assert.ok(after !== undefined, `seed ${seed}: no write returned`);
      return { resolved, bytes: await after.readFile('/d/f') };
    };
    /** Per sector of the write: 'new' (all its bytes) or 'zero' (none), else the sector is mixed. */
    const sectors = (bytes: Uint8Array, write: (typeof writes)[number]): string[] => {
      const result: string[] = [];
      for (let start = 0; start < write.bytes.length; start += 512) {
        const landed = bytes.subarray(write.position + start, write.position + start + 512);
        const expected = write.bytes.subarray(start, start + 512);
        if (landed.length === expected.length && landed.every((byte, index) => byte === expected[index])) result.push('new');
        else if (landed.every((byte) => byte === 0)) result.push('zero');
        else result.push('mixed');
      }
      return result;
    };
    let pendingAndHit = 0;
    for (const seed of seeds) {
      const durable = await run(seed, 'keep-none');
      const current = await run(seed, 'keep-all');
      const random = await run(seed, 'random');
      assert.deepEqual(current.resolved, durable.resolved, `seed ${seed}: the runs differ before the power loss`);
      assert.deepEqual(random.resolved, durable.resolved, `seed ${seed}: the runs differ before the power loss`);
      for (const write of writes) {
        const where = `seed ${seed}, ${write.name} write`;
        const inDurable = sectors(durable.bytes, write);
        const inCurrent = sectors(current.bytes, write);
        const inRandom = sectors(random.bytes, write);
        assert.ok(!inRandom.includes('mixed'), `${where}: a sector is partly written (${inRandom.join()})`);
        if (durable.resolved.includes(write.name)) {
          for (const image of [inDurable, inCurrent, inRandom]) assert.ok(image.every((sector) => sector === 'new'), `${where}: returned, yet not durable`);
          continue;
        }
        assert.ok(inDurable.every((sector) => sector === 'zero'), `${where}: still in flight, yet durable (another write's sync covered it)`);
        assert.ok(inCurrent.every((sector) => sector === inCurrent[0]), `${where}: half recorded`);
        if (inCurrent[0] === 'zero') assert.ok(inRandom.every((sector) => sector === 'zero'), `${where}: never recorded, yet landed`);
        else if (write.name === 'first' && inRandom.includes('zero')) pendingAndHit++;
      }
    }
    assert.ok(pendingAndHit > 0, 'no power loss found the first write pending behind a returned second one and lost or tore it');
  });

  it('a write-through writev syncs the whole file when another pending write overlaps it or a truncate is pending', async () => {
    /** A handle whose write of `pattern(1024)` at 0 landed but failed at its sync (O_DSYNC's EIO), so it is pending. */
    const withPendingWrite = async (): Promise<{ fs: SimFileSystem; handle: FileHandle }> => {
      const { fs, handle } = await fileWith(1, undefined, true);
      fs.failAfter('datasync', 0, 'EIO');
      await assert.rejects(handle.writev([pattern(1024)], 0), { code: 'EIO' });
      return { fs, handle };
    };
    const disjoint = await withPendingWrite();
    await disjoint.handle.writev([filled(512, 0xbb)], 1024);
    assert.deepEqual(disjoint.fs.durableBytes('/d/f'), Uint8Array.from([...filled(1024, 0), ...filled(512, 0xbb)]), 'disjoint: its own write only');

    // Left pending, the older write's second sector could land over the newer synced bytes.
    const overlapping = await withPendingWrite();
    await overlapping.handle.writev([filled(1024, 0xbb)], 512);
    const both = Uint8Array.from([...pattern(512), ...filled(1024, 0xbb)]);
    assert.deepEqual(overlapping.fs.durableBytes('/d/f'), both, 'overlapping: the whole file');
    assert.deepEqual(await overlapping.fs.powerLoss().readFile('/d/f'), both);

    // Left pending, the truncate could land after the synced write and cut it.
    const { fs, handle } = await fileWith(1, undefined, true);
    await handle.writev([filled(2048, 9)], 0);
    await handle.truncate(1024);
    await handle.writev([filled(512, 0xbb)], 1024);
    const cut = Uint8Array.from([...filled(1024, 9), ...filled(512, 0xbb)]);
    assert.deepEqual(fs.durableBytes('/d/f'), cut, 'truncate pending: the whole file');
    assert.deepEqual(await fs.powerLoss().readFile('/d/f'), cut);
  });
});
