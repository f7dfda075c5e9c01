// The WAL on the real file system: ordering, group commit, segment rolls, limits, the lock.
import assert from 'node:assert/strict';
import { constants, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, test } from 'node:test';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { segmentFileName } from '../../engine/wal/format.ts';
import { Wal } from '../../engine/wal/wal.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { wrappedFileSystem } from '../helpers/wrapped-file-system.ts';
import { SimFileSystem, type SimOp } from '../sim/sim-file-system.ts';

const dirs: string[] = [];
function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fermata-wal-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const text = (body: Uint8Array): string => new TextDecoder().decode(body);

async function readAll(wal: Wal, fromSeq?: number): Promise<Array<[number, number, string]>> {
  const out: Array<[number, number, string]> = [];
  for await (const record of wal.records(fromSeq)) out.push([record.seq, record.type, text(record.body)]);
  return out;
}

test('appends resolve with consecutive sequences and read back after reopening', async () => {
  const dir = freshDir();
  let wal = await Wal.open({ dir });
  assert.equal(await wal.append(1, bytes('first')), 1);
  assert.equal(await wal.append(7, bytes('')), 2);
  assert.equal(await wal.append(255, bytes('third')), 3);
  await wal.close();
  wal = await Wal.open({ dir });
  assert.deepEqual(await readAll(wal), [
    [1, 1, 'first'],
    [2, 7, ''],
    [3, 255, 'third'],
  ]);
  assert.deepEqual(await readAll(wal, 3), [[3, 255, 'third']]);
  assert.equal(await wal.append(2, bytes('fourth')), 4, 'appends continue after reopening');
  await wal.close();
});

test('concurrent appends share fdatasyncs (group commit) and keep queue order', async () => {
  const wal = await Wal.open({ dir: freshDir() });
  const seqs = await Promise.all(Array.from({ length: 1000 }, (_, i) => wal.append(1, bytes(`r${i}`))));
  assert.deepEqual(seqs, Array.from({ length: 1000 }, (_, i) => i + 1));
  assert.ok(wal.counters.syncs <= 10, `1000 concurrent appends took ${wal.counters.syncs} fdatasyncs`);
  assert.equal(wal.counters.syncs, wal.counters.groups);
  await wal.close();
});

test('the next group is being written before the synced group is acknowledged', async () => {
  // Appenders act on an acknowledgement (an admit puts its batch in memory): the disk should be
  // busy with the next group meanwhile, not idle until they are done.
  const events: string[] = [];
  let wal: Wal | undefined;
  let queued: Array<Promise<number>> = [];
  let writes = 0;
  let writeThrough = false;
  const fs = wrappedFileSystem((handle) => ({
    writev: (chunks, position) => {
      writeThrough = handle.writeThrough;
      if (wal !== undefined) {
        events.push(`writev ${++writes}`);
        // While the first record's group is on its way, two more appends queue behind it.
        if (writes === 1) queued = [wal.append(1, bytes('b')), wal.append(1, bytes('c'))];
      }
      return handle.writev(chunks, position);
    },
    datasync: async () => {
      events.push('datasync');
      await handle.datasync();
    },
  }));
  wal = await Wal.open({ dir: freshDir(), fs });
  events.length = 0;
  const first = wal.append(1, bytes('a')).then((seq) => {
    events.push(`acknowledged ${seq}`);
    return seq;
  });
  assert.equal(await first, 1);
  assert.deepEqual(await Promise.all(queued), [2, 3]);
  // A write-through segment's writev is its sync.
  const synced = writeThrough ? ['writev 1'] : ['writev 1', 'datasync'];
  assert.deepEqual(events.slice(0, synced.length + 2), [...synced, 'writev 2', 'acknowledged 1']);
  assert.equal(wal.counters.groups, 2, 'b and c went as one group');
  await wal.close();
  const reopened = await Wal.open({ dir: wal.dir });
  assert.deepEqual(await readAll(reopened), [
    [1, 1, 'a'],
    [2, 1, 'b'],
    [3, 1, 'c'],
  ]);
  await reopened.close();
});

test('a next group whose write cannot even be started is refused, not lost, and the group ahead stays acknowledged', async () => {
  // A handle whose writev throws instead of rejecting (outside the FileHandle contract, as a
  // bug would): the early start puts the group back, and the loop's own start poisons it.
  let wal: Wal | undefined;
  let queued: Array<Promise<number>> = [];
  let writes = 0;
  const fs = wrappedFileSystem((handle) => ({
    writev: (chunks, position) => {
      if (wal === undefined) return handle.writev(chunks, position);
      if (++writes === 1) queued = [wal.append(1, bytes('b')), wal.append(1, bytes('c'))];
      if (writes >= 2) throw Object.assign(new Error('writev broke'), { code: 'EIO' });
      return handle.writev(chunks, position);
    },
  }));
  wal = await Wal.open({ dir: freshDir(), fs });
  assert.equal(await wal.append(1, bytes('a')), 1, 'the group ahead is durable and acknowledged');
  for (const append of queued) await assert.rejects(withTimeout(append, 5000, 'the refusal of an append'), (err) => isFermataError(err, errorCodes.walPoisoned));
  await wal.close();
});

test('a group never passes groupBytesMax, and each group is one sync', async () => {
  const groups: number[] = [];
  const wal = await Wal.open({ dir: freshDir(), limits: { groupBytesMax: 1000 }, onGroupCommitted: (s) => groups.push(s.bytes) });
  await Promise.all(Array.from({ length: 100 }, () => wal.append(1, new Uint8Array(68))));
  assert.equal(groups.length, 10, 'ten records of 100 framed bytes fit each 1000-byte group');
  assert.ok(groups.every((b) => b <= 1000));
  await wal.close();
});

test('segments roll at segmentBytes, their names sort in replay order, and replay crosses them', async () => {
  const dir = freshDir();
  let wal = await Wal.open({ dir, limits: { segmentBytes: 4096 } });
  for (let i = 0; i < 200; i++) await wal.append(1, bytes(`record ${i} `.padEnd(100, '.')));
  assert.ok(wal.segmentCount > 5);
  await wal.close();
  const names = readdirSync(dir).filter((n) => n.endsWith('.wal'));
  assert.deepEqual(names, [...names].sort());
  assert.equal(names[0], '0000000001.wal');
  wal = await Wal.open({ dir, limits: { segmentBytes: 4096 } });
  const records = await readAll(wal);
  assert.equal(records.length, 200);
  assert.ok(records.every(([seq, , body], i) => seq === i + 1 && body.startsWith(`record ${i} `)));
  await wal.close();
});

test('a record over recordBodyBytesMax and a full queue reject with coded errors', async () => {
  const wal = await Wal.open({ dir: freshDir(), limits: { recordBodyBytesMax: 1000, queueBytesMax: 4096 } });
  await assert.rejects(wal.append(1, new Uint8Array(1001)), (err) => isFermataError(err, errorCodes.walRecordTooLarge));
  const accepted = [wal.append(1, new Uint8Array(1000)), wal.append(1, new Uint8Array(1000)), wal.append(1, new Uint8Array(1000))];
  await assert.rejects(wal.append(1, new Uint8Array(1000)), (err) => isFermataError(err, errorCodes.walQueueFull));
  assert.deepEqual(await Promise.all(accepted), [1, 2, 3]);
  assert.equal(await wal.append(1, new Uint8Array(1000)), 4, 'room again once the queue drained');
  await wal.close();
  await assert.rejects(wal.append(1, new Uint8Array(1)), (err) => isFermataError(err, errorCodes.walClosed));
});

test('one process per directory: a second open is refused while the first holds it', async () => {
  const dir = freshDir();
  const wal = await Wal.open({ dir });
  await assert.rejects(Wal.open({ dir }), (err) => isFermataError(err, errorCodes.dataDirLocked) && /in use by process/.test(err.message));
  await wal.close();
  const again = await Wal.open({ dir });
  await again.close();
});

test('a lock held by a live process of another start is kept; a dead owner’s lock is taken over', async () => {
  const dir = freshDir();
  // The process that started this one lives as long as the test does: a live owner, without a child.
  const owner = process.ppid;
  const stat = readFileSync(`/proc/${owner}/stat`, 'utf8');
  const startTicks = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  writeFileSync(join(dir, 'LOCK'), JSON.stringify({ pid: owner, startTicks, host: hostname() }));
  await assert.rejects(Wal.open({ dir }), (err) => isFermataError(err, errorCodes.dataDirLocked));
  writeFileSync(join(dir, 'LOCK'), JSON.stringify({ pid: owner, startTicks: '1', host: hostname() }));
  const reusedPid = await Wal.open({ dir });
  await reusedPid.close();
  writeFileSync(join(dir, 'LOCK'), JSON.stringify({ pid: 2 ** 22 + 1, startTicks: '5', host: hostname() }));
  const wal = await Wal.open({ dir });
  await wal.close();
});

test('an append asked to start now is being written within the call; others wait for the task to end and go together', async () => {
  const fs = new SimFileSystem({ seed: 4 });
  const wal = await Wal.open({ dir: '/data/wal', fs });
  let writes = 0;
  fs.setFault((op) => {
    if (op === 'writev') writes++;
    return undefined;
  });
  const burst = [wal.append(1, bytes('a')), wal.append(1, bytes('b'))];
  assert.equal(writes, 0, 'a burst waits for the task to end');
  assert.deepEqual(await Promise.all(burst), [1, 2]);
  assert.equal(writes, 1, 'and is one group');
  const now = wal.append(1, bytes('c'), { startNow: true });
  assert.equal(writes, 2, 'started within the append');
  const behind = [wal.append(1, bytes('d')), wal.append(1, bytes('e'), { startNow: true })];
  assert.equal(writes, 3, 'beside a write under way (write-through), the next group is written at once too');
  const third = wal.append(1, bytes('f'), { startNow: true });
  assert.equal(writes, 3, 'but no third at once: it rides the group after them');
  assert.deepEqual(await Promise.all([now, ...behind, third]), [3, 4, 5, 6]);
  assert.equal(writes, 4);
  assert.equal(wal.counters.groups, 4);
  await wal.close();
});

test('without write-through, an append asked to start now while a group is being written waits for it', async () => {
  const fs = new SimFileSystem({ seed: 4, writeThrough: false });
  const wal = await Wal.open({ dir: '/data/wal', fs });
  let writes = 0;
  fs.setFault((op) => {
    if (op === 'writev') writes++;
    return undefined;
  });
  const now = wal.append(1, bytes('a'), { startNow: true });
  assert.equal(writes, 1, 'started within the append');
  const behind = [wal.append(1, bytes('b')), wal.append(1, bytes('c'), { startNow: true })];
  assert.equal(writes, 1, 'a log already writing takes the next ones as its next group');
  assert.deepEqual(await Promise.all([now, ...behind]), [1, 2, 3]);
  assert.equal(writes, 2);
  assert.equal(wal.counters.overlappedGroups, 0);
  await wal.close();
});

test('groups mixing small and large bodies (copied and written in place) read back byte for byte', async () => {
  const dir = freshDir();
  let wal = await Wal.open({ dir });
  const sizes = [5, 200_000, 0, 17, 64 * 1024, 64 * 1024 - 1, 3, 1 << 20, 9];
  const bodies = sizes.map((size, i) => Uint8Array.from({ length: size }, (_, j) => (i * 131 + j * 17) & 0xff));
  assert.deepEqual(await Promise.all(bodies.map((body) => wal.append(3, body))), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
  assert.equal(wal.counters.groups, 1);
  await wal.close();
  wal = await Wal.open({ dir });
  const back: Uint8Array[] = [];
  for await (const record of wal.records()) back.push(record.body.slice());
  assert.deepEqual(back, bodies);
  await wal.close();
});

test('a body given in parts is stored as their concatenation, copied or written in place', async () => {
  const dir = freshDir();
  let wal = await Wal.open({ dir });
  const header = bytes('HDR:');
  const large = Uint8Array.from({ length: 300_000 }, (_, j) => (j * 13) & 0xff);
  await Promise.all([wal.append(4, [header, bytes('small'), new Uint8Array(0)]), wal.append(4, [header, large]), wal.append(4, [])]);
  await wal.close();
  wal = await Wal.open({ dir });
  const back: Uint8Array[] = [];
  for await (const record of wal.records()) back.push(record.body.slice());
  assert.equal(text(back[0] as Uint8Array), 'HDR:small');
  assert.deepEqual(back[1], Uint8Array.from([...header, ...large]));
  assert.equal(back[2]?.length, 0);
  await wal.close();
});

test('missing-first-segment: a log whose first segment is gone refuses to start instead of starting short', async () => {
  const dir = freshDir();
  const wal = await Wal.open({ dir, limits: { segmentBytes: 4096 } });
  for (let i = 0; i < 100; i++) await wal.append(1, new Uint8Array(100));
  await wal.close();
  rmSync(join(dir, '0000000001.wal'));
  await assert.rejects(Wal.open({ dir }), (err) => isFermataError(err, errorCodes.walCorrupt) && /earlier segments are missing/.test(err.message));
});

test('replay of a segment longer than one read chunk gives the event loop a turn along the way', async () => {
  const dir = freshDir();
  let wal = await Wal.open({ dir });
  // 96 records of 64 KiB: one 6 MiB segment, read in two 4 MiB chunks.
  const body = new Uint8Array(64 * 1024);
  await Promise.all(Array.from({ length: 96 }, () => wal.append(1, body)));
  await wal.close();
  let turned = false;
  let turnedBeforeLast: boolean | undefined;
  wal = await Wal.open({
    dir,
    replay: (seq) => {
      if (seq === 1) {
        // Long enough for the second chunk to land and for a turn to be due: replay then reaches
        // it without waiting for the disk, and only its own turn lets this callback run.
        setImmediate(() => (turned = true));
        const until = performance.now() + 50;
        while (performance.now() < until);
      }
      if (seq === 96) turnedBeforeLast = turned;
    },
  });
  await wal.close();
  assert.equal(turnedBeforeLast, true, 'a setImmediate from the first record ran before the last record was replayed');
});

/** The open-file flags of every descriptor of this process on `path` (Linux: /proc/self/fd and fdinfo). */
function openFlagsOf(path: string): number[] {
  const flags: number[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    let target: string;
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue; // closed meanwhile (the listing's own descriptor)
    }
    if (target !== path) continue;
    const match = /^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'));
    if (match !== null) flags.push(Number.parseInt(match[1] as string, 8));
  }
  return flags;
}

test('segments are written through (O_DSYNC): a group commit calls no fdatasync, created or reopened', { skip: process.platform !== 'linux' && 'reads /proc/self/fdinfo' }, async () => {
  const dir = freshDir();
  let syncs = 0;
  const fs = wrappedFileSystem((handle) => ({
    datasync: async () => {
      syncs++;
      await handle.datasync();
    },
  }));
  for (const life of ['created', 'reopened']) {
    const wal = await Wal.open({ dir, fs });
    const flags = openFlagsOf(join(dir, segmentFileName(1)));
    assert.equal(flags.length, 1, `${life}: one descriptor on the segment`);
    assert.notEqual((flags[0] as number) & constants.O_DSYNC, 0, `${life}: the segment is open O_DSYNC`);
    const before = syncs;
    for (let i = 0; i < 5; i++) await wal.append(1, bytes(`${life} ${i}`));
    await Promise.all([wal.append(1, bytes('a')), wal.append(1, bytes('b'))]);
    assert.equal(syncs, before, `${life}: no fdatasync after a write-through group`);
    assert.ok(wal.counters.syncs >= 6, 'each group still counts as a sync');
    await wal.close();
  }
  const wal = await Wal.open({ dir });
  assert.equal((await readAll(wal)).length, 14);
  await wal.close();
});

test('where the disk has no write-through, every group commit is covered by an fdatasync', async () => {
  const fs = new SimFileSystem({ seed: 3, writeThrough: false });
  const ops: SimOp[] = [];
  const wal = await Wal.open({ dir: '/data/wal', fs });
  fs.setFault((op) => {
    if (op === 'writev' || op === 'datasync') ops.push(op);
    return undefined;
  });
  for (let i = 0; i < 4; i++) await wal.append(1, bytes(`record ${i}`));
  assert.deepEqual(ops, ['writev', 'datasync', 'writev', 'datasync', 'writev', 'datasync', 'writev', 'datasync']);
  await wal.close();
  const after = fs.powerLoss({ mode: 'keep-none' });
  const reopened = await Wal.open({ dir: '/data/wal', fs: after });
  assert.equal((await readAll(reopened)).length, 4, 'every acknowledged record survives the power loss');
  await reopened.close();
});

test('a logger that throws on a slow sync, or an onPoisoned that throws, leaves no append unanswered', async () => {
  const warnings: string[] = [];
  const throwing = {
    warn(_details: object, message: string) {
      if (/slow/.test(message)) throw new Error('logger down');
      warnings.push(message);
    },
  };
  const fs = new SimFileSystem({ seed: 9 });
  const wal = await Wal.open({
    dir: '/data/wal',
    fs,
    logger: throwing,
    limits: { slowSyncMs: 0 },
    onPoisoned: () => {
      throw new Error('observer down');
    },
  });
  assert.deepEqual(await withTimeout(Promise.all([wal.append(1, bytes('a')), wal.append(1, bytes('b'))]), 5000, 'the group after a throwing slow-sync warning'), [1, 2]);
  fs.setFault((op) => (op === 'writev' ? 'EIO' : undefined));
  await assert.rejects(withTimeout(wal.append(1, bytes('c')), 5000, 'the refusal after a throwing onPoisoned'), (err: unknown) => isFermataError(err, errorCodes.walPoisoned));
  fs.setFault(undefined);
  await wal.cutToSynced();
  await wal.close();
  assert.equal(warnings[0], 'a group commit observer threw');
  assert.ok(warnings.includes('onPoisoned threw'));
});
