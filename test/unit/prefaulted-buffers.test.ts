// Slabs made ahead on the helper thread (prefaulted-buffers.ts): a supply hands over buffers of
// its size once they arrive and never blocks; an arena that prefaults takes its slabs from it
// and keeps every string intact; and the helper never keeps a process alive.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ByteArena } from '../../engine/store/byte-arena.ts';
import { PrefaultedBuffers } from '../../engine/store/prefaulted-buffers.ts';

/** How long a test waits for the helper thread (it starts in tens of ms; CI machines are slow). */
const arrivalWaitMs = 10_000;

async function takeWithin(supply: PrefaultedBuffers, waitMs: number): Promise<ArrayBuffer | undefined> {
  const deadline = performance.now() + waitMs;
  for (;;) {
    const buffer = supply.take();
    if (buffer !== undefined || performance.now() > deadline) return buffer;
    await sleep(5);
  }
}

test('a supply hands over each requested buffer once, of its size, and nothing unrequested', async () => {
  const supply = new PrefaultedBuffers(64 * 1024);
  try {
    assert.equal(supply.take(), undefined, 'nothing was requested');
    supply.request();
    supply.request();
    assert.equal(supply.outstanding, 2);
    const first = await takeWithin(supply, arrivalWaitMs);
    const second = await takeWithin(supply, arrivalWaitMs);
    assert.ok(first instanceof ArrayBuffer && second instanceof ArrayBuffer, 'both requests answered');
    assert.equal(first.byteLength, 64 * 1024);
    assert.equal(second.byteLength, 64 * 1024);
    assert.notEqual(first, second);
    assert.equal(supply.outstanding, 0);
    assert.equal(supply.taken, 2);
    // Writable where it lies: the arena writes strings straight into it.
    new Uint8Array(first).fill(7);
    assert.equal(new Uint8Array(first)[64 * 1024 - 1], 7);
    assert.equal(await takeWithin(supply, 100), undefined, 'a third buffer was never requested');
  } finally {
    supply.close();
  }
});

test('a closed supply neither requests nor hands over', async () => {
  const supply = new PrefaultedBuffers(4096);
  supply.request();
  supply.close();
  supply.request();
  assert.equal(await takeWithin(supply, 200), undefined);
  assert.equal(supply.taken, 0);
});

test('an arena that prefaults fills slabs from the helper and keeps every string', async () => {
  const slabBytes = 16 * 1024;
  const arena = new ByteArena({ slabBytes, prefault: true });
  try {
    const strings: Array<{ ref: number; bytes: Uint8Array }> = [];
    // 100-byte strings, pausing now and then so that the slab asked for as the current one
    // opened has arrived before that one is full.
    for (let i = 0; i < 700; i++) {
      const bytes = new Uint8Array(100).fill(i & 0xff);
      bytes[0] = i >> 8;
      strings.push({ ref: arena.add(bytes), bytes });
      if (i % 10 === 9) await sleep(2);
    }
    assert.ok(arena.slabCount >= 4, `700 strings of 100 bytes fill ${arena.slabCount} slabs of 16 KiB`);
    assert.ok(arena.slabsPrefaulted >= 2, `only ${arena.slabsPrefaulted} of ${arena.slabCount} slabs came from the helper`);
    for (const { ref, bytes } of strings) assert.deepEqual(arena.view(ref, bytes.length), bytes);
    assert.equal(arena.bytesReserved, arena.slabCount * slabBytes, 'a prefaulted slab is counted as any other');
  } finally {
    arena.close();
  }
});

test('an arena with small slabs does not prefault unless told to', () => {
  const arena = new ByteArena({ slabBytes: 1024 });
  for (let i = 0; i < 50; i++) arena.add(new Uint8Array(100));
  assert.equal(arena.slabsPrefaulted, 0);
});

test('the helper thread does not keep a process alive', async () => {
  // The child waits until the helper has answered (so it is surely running), then has nothing
  // left to do: it must exit by itself.
  const script = [
    "import { setTimeout as sleep } from 'node:timers/promises';",
    `import { PrefaultedBuffers } from '${new URL('../../engine/store/prefaulted-buffers.ts', import.meta.url).href}';`,
    'const supply = new PrefaultedBuffers(4096);',
    'supply.request();',
    'while (supply.take() === undefined) await sleep(5);',
    "console.log('done');",
  ].join('\n');
  // A file, not --eval: a worker inherits the parent's execArgv, and with it --input-type.
  const dir = await mkdtemp(join(tmpdir(), 'fermata-prefault-'));
  try {
    const file = join(dir, 'child.mjs');
    await writeFile(file, script);
    const child = spawnSync(process.execPath, [file], { encoding: 'utf8', timeout: 20_000 });
    assert.equal(child.error, undefined, 'the child exited by itself (no timeout)');
    assert.equal(child.status, 0, child.stderr);
    assert.equal(child.stdout.trim(), 'done');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
