// The export's bytes held fixed (engine/timer-export.ts, engine/timer-query.ts, the spill reads
// under them): exports of one engine, made the same way every run (a fixed clock, a seeded
// simulated disk), each digested to SHA-256 and compared with the digest the export made before
// its scan was changed. Resident and spilled timers in three runs sharing buckets, a resident
// one cancelled and one rescheduled, spilled ones cancelled, keys, headers, callbacks; with
// filters, from a cursor, and in batch sizes whose windows end inside a bucket group and across
// several (so a scan that carries a group from one window to the next is held to the same bytes).
// And the export's reads (engine/spill/scan-reads.ts): a run file opened once an export, closed at
// its end.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { tableFromIPC } from 'apache-arrow';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { Engine, type QueryPosition, queryStart, type TimerFilter } from '../../engine/engine.ts';
import type { FileSystem } from '../../engine/fs/file-system.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const hour = 3600_000;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);

async function digest(engine: Engine, filter: TimerFilter, batchRows: number, after: QueryPosition = queryStart): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of engine.exportTimers(filter, batchRows, after)) hash.update(chunk);
  return hash.digest('hex').slice(0, 16);
}

test('exports over resident and spilled timers make the same bytes as before, with filters, from a cursor, in any batch size', async () => {
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 4141 }), clock: { now: () => t0 } });
  // Three admits, each spilled by a checkpoint: runs 1–3 share the buckets of hours 10–16.
  for (let run = 0; run < 3; run++) {
    const specs: TimerSpec[] = Array.from({ length: 700 }, (_, i) => {
      const n = run * 700 + i;
      const resident = n % 9 === 0;
      return {
        fireAtMs: resident ? t0 + hour + n * 997 : t0 + 10 * hour + ((n * 7919) % (6 * hour)),
        target: n % 11 === 0 ? 'https://b.example/other' : 'https://a.example/hook',
        payload: n % 6 === 0 ? '' : `payload ${n} ${'x'.repeat(n % 150)}`,
        queue: n % 4 === 0 ? 'q4' : 'main',
        ...(n % 3 === 0 ? { key: `key-${n}` } : {}),
        ...(n % 5 === 0 ? { headers: { 'x-n': String(n) } } : {}),
        ...(n % 13 === 0 ? { callback: `https://cb.example/done/${n}` } : {}),
        ...(n % 17 === 0 ? { failureCallback: `https://cb.example/dead/${n}` } : {}),
      };
    });
    await engine.admit(batchFromSpecs(specs));
    await engine.checkpoint(t0 + 3 * hour);
  }
  assert.equal(engine.stats().spill.runs, 3);
  const listed = (await engine.listTimers({}, 1000)).timers;
  for (const view of listed.filter((_, i) => i % 41 === 3)) assert.equal(await engine.cancel(view.id), 'cancelled');
  const spilledPage = (await engine.listTimers({ dueAfterMs: t0 + 11 * hour }, 50)).timers;
  for (const view of spilledPage.filter((_, i) => i % 7 === 0)) assert.equal(await engine.cancel(view.id), 'cancelled');
  assert.equal((await engine.reschedule(listed[10]?.id as string, { callback: 'https://cb.example/patched' })).outcome, 'rescheduled');

  const cursorAt = (await engine.listTimers({}, 1000)).timers[400];
  const from: QueryPosition = { dueMs: cursorAt?.fireAtMs as number, seq: -1, row: 0 };
  const digests = {
    all7: await digest(engine, {}, 7),
    all64: await digest(engine, {}, 64),
    all300: await digest(engine, {}, 300),
    all4096: await digest(engine, {}, 4096),
    queue: await digest(engine, { queue: 'q4' }, 50),
    window: await digest(engine, { dueAfterMs: t0 + 11 * hour, dueBeforeMs: t0 + 14 * hour }, 33),
    prefix: await digest(engine, { keyPrefix: new TextEncoder().encode('key-1') }, 16),
    state: await digest(engine, { state: 'cancelled' }, 4096),
    fromCursor: await digest(engine, {}, 100, from),
  };
  assert.deepEqual(digests, {
    all7: '0e8e5f09c0b3583b',
    all64: '11256f718b3c2803',
    all300: 'ade22228a7150130',
    all4096: '70f5027e6e15f123',
    queue: 'a6c7e7b6d2c9b9d7',
    window: '17eed841eafd9733',
    prefix: '7a455ddf9ed9dbd5',
    state: 'd0eeb2634b9bb7dd',
    fromCursor: '30af18f45a7f85c8',
  });
  await engine.close();
});

/** The simulated disk, counting the run files opened and closed while `counts.watching`. */
function countingDisk(seed: number): { fs: FileSystem; counts: { watching: boolean; opens: number; closes: number } } {
  const sim = new SimFileSystem({ seed });
  const counts = { watching: false, opens: 0, closes: 0 };
  const fs: FileSystem = {
    mkdirp: (dir) => sim.mkdirp(dir),
    list: (dir) => sim.list(dir),
    readFile: (path) => sim.readFile(path),
    rename: (from, to) => sim.rename(from, to),
    unlink: (path) => sim.unlink(path),
    syncDir: (dir) => sim.syncDir(dir),
    lockDir: (dir) => sim.lockDir(dir),
    open: async (path, mode, options) => {
      const handle = await sim.open(path, mode, options);
      if (!counts.watching || !path.endsWith('.arrow')) return handle;
      counts.opens++;
      return {
        writeThrough: handle.writeThrough,
        writev: (chunks, position) => handle.writev(chunks, position),
        read: (into, position) => handle.read(into, position),
        datasync: () => handle.datasync(),
        truncate: (length) => handle.truncate(length),
        size: () => handle.size(),
        close: () => {
          counts.closes++;
          return handle.close();
        },
      };
    },
  };
  return { fs, counts };
}

/** `runs` admits of `rows` timers over hours 10–16, each spilled by a checkpoint into a run of its own. */
async function spillRuns(engine: Engine, runs: number, rows: number): Promise<void> {
  for (let run = 0; run < runs; run++) {
    await engine.admit(batchFromSpecs(Array.from({ length: rows }, (_, i) => ({ fireAtMs: t0 + 10 * hour + (((run * rows + i) * 7919) % (6 * hour)), target: 'https://a.example/hook', payload: `p${i}` }))));
    await engine.checkpoint(t0 + 3 * hour);
  }
}

test('an export opens each run file once, however many batches it reads, and closes it at its end or when abandoned', async () => {
  const { fs, counts } = countingDisk(4142);
  const engine = await Engine.open({ dataDir: '/data', fs, clock: { now: () => t0 } });
  await spillRuns(engine, 3, 600);
  assert.equal(engine.stats().spill.runs, 3);
  counts.watching = true;
  let chunks = 0;
  // Windows of 40 timers: some 45 windows over 18 batches (6 buckets, a batch of each run).
  for await (const _ of engine.exportTimers({}, 10)) chunks++;
  assert.equal(chunks, 182, 'the schema, 180 record batches, the end');
  assert.ok(counts.opens >= 1 && counts.opens <= 3, `${counts.opens} run files opened for one export`);
  assert.equal(counts.closes, counts.opens, 'every one closed at its end');
  const abandoned = engine.exportTimers({}, 10);
  for (let i = 0; i < 5; i++) await abandoned.next();
  await abandoned.return(undefined);
  assert.equal(counts.closes, counts.opens, 'an abandoned export closes its files too');
  await engine.close();
});

test('an export closes the files of runs a compaction dropped while it runs, before its end', async () => {
  const { fs, counts } = countingDisk(4144);
  const engine = await Engine.open({ dataDir: '/data', fs, clock: { now: () => t0 } });
  await spillRuns(engine, 3, 600);
  counts.watching = true;
  const exporting = engine.exportTimers({}, 10);
  for (let i = 0; i < 20; i++) await exporting.next();
  const openedBefore = counts.opens;
  assert.ok(openedBefore >= 1 && counts.closes === 0);
  // More runs than spilledRunsMax: the checkpoint merges them all into one.
  counts.watching = false;
  await spillRuns(engine, 6, 10);
  assert.equal(engine.stats().spill.runs, 1);
  counts.watching = true;
  for (let i = 0; i < 8; i++) await exporting.next();
  assert.equal(counts.closes, openedBefore, 'the dropped runs\' files are closed while the export goes on');
  let rest = 0;
  for (;;) {
    const next = await exporting.next();
    if (next.done === true) break;
    rest++;
  }
  assert.ok(rest > 100, `${rest} chunks after the compaction`);
  assert.equal(counts.closes, counts.opens, 'and the merged run\'s at the end');
  await engine.close();
});

test('an export past the resident timers still finds one added ahead of it meanwhile, and one cancelled meanwhile as cancelled', async () => {
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 4143 }), clock: { now: () => t0 } });
  await engine.admit(batchFromSpecs(Array.from({ length: 3000 }, (_, i) => ({ fireAtMs: t0 + 10 * hour + ((i * 7919) % (6 * hour)), target: 'https://a.example/hook', payload: `s${i}` }))));
  await engine.checkpoint(t0 + 3 * hour);
  const early = await engine.admit(batchFromSpecs(Array.from({ length: 30 }, (_, i) => ({ fireAtMs: t0 + hour + i * 1000, target: 'https://a.example/hook', payload: `r${i}` }))));
  // Timers added after the checkpoint stay resident, wherever they are due: one far ahead.
  const ahead = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 14 * hour, target: 'https://a.example/hook', payload: 'ahead' }]));
  assert.equal(engine.stats().resident, 31);

  const ids: string[] = [];
  const exporting = engine.exportTimers({}, 7);
  const take = async (batches: number): Promise<void> => {
    for (let b = 0; b < batches; b++) {
      const next = await exporting.next();
      if (next.done === true) return;
      const table = tableFromIPC([schemaChunk as Uint8Array, next.value]);
      ids.push(...(table.getChild('id')?.toArray() as string[]));
    }
  };
  const schemaChunk = (await exporting.next()).value;
  // Ten batches of 7: past the 30 early resident timers, into the spilled ones (windows of 28).
  await take(10);
  assert.ok(ids.includes(early.idOf(29)) && !ids.includes(ahead.idOf(0)));
  const added = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 15 * hour, target: 'https://a.example/hook', payload: 'added' }]));
  assert.equal(await engine.cancel(ahead.idOf(0)), 'cancelled');
  await take(Infinity);
  assert.ok(ids.includes(added.idOf(0)), 'a timer added ahead of the export while it ran is in it');
  assert.equal(ids.filter((id) => id === ahead.idOf(0)).length, 1, 'the cancelled one once, as cancelled, at its fire time');
  assert.equal(ids.length, 3032);
  await engine.close();
});
