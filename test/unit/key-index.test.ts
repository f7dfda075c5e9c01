// KeyIndex's batch paths against its one-key paths and a model: insertMany indexes exactly what
// insert() one by one would (find answers the same for every key, through deletes and growth),
// and markUnindexed marks a hash only when find() cannot hold it. Hashes are drawn from a small
// range, so many keys share one, and home cells collide.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { KeyIndex, keyHash, keyHashIn } from '../../engine/store/key-index.ts';
import { propertyRuns } from '../helpers/property.ts';

const utf8 = new TextEncoder();

test('keyHashIn hashes a range as keyHash hashes a copy of it, with or without a DataView, wherever the bytes lie', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(), fc.nat(), fc.integer({ min: 0, max: 7 }), (unshifted, a, b, shift) => {
      // The bytes start `shift` bytes into their buffer (a replayed record's keys lie anywhere).
      const bytes = new Uint8Array(shift + unshifted.length).subarray(shift);
      bytes.set(unshifted);
      const start = bytes.length === 0 ? 0 : a % (bytes.length + 1);
      const end = start + (bytes.length === 0 ? 0 : b % (bytes.length - start + 1));
      const expected = keyHash(bytes.slice(start, end));
      assert.equal(keyHashIn(bytes, start, end), expected);
      assert.equal(keyHashIn(bytes, start, end, new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)), expected);
    }),
    propertyRuns(300),
  );
});

test('keyHash is the hash spill files hold: fixed values', () => {
  // Spill runs store these hashes on disk: a change to the function must fail here. (Murmur3's
  // own test vector: 'a' with seed 0 is 0x3c2569b2.)
  assert.deepEqual(
    ['', 'a', 'key-1', 'k'.repeat(64)].map((key) => keyHash(utf8.encode(key))),
    [0, 1009084850, 2561742240, 2234589301],
  );
});

test('insertMany and markUnindexed agree with insert and find, through deletes', () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 15 })), { maxLength: 400 }),
      fc.array(fc.nat(), { maxLength: 80 }),
      fc.integer({ min: 1, max: 7 }),
      (specs, deletions, batches) => {
        // Slot i holds key "k<name>"; its hash is forced into a small range (as if colliding).
        const names = [...new Set(specs.map(([name]) => name))];
        const keys = names.map((name) => utf8.encode(`k${name}`));
        const hashes = Uint32Array.from(names, (name, i) => (specs.find(([n]) => n === name)?.[1] ?? 0) * 1024 + (i % 3));
        const store = { keyOf: (slot: number) => keys[slot] as Uint8Array };
        const one = new KeyIndex(store, 2);
        const many = new KeyIndex(store, 2);
        const per = Math.ceil(names.length / batches);
        for (let from = 0; from < names.length; from += per) {
          const count = Math.min(per, names.length - from);
          const slots = Int32Array.from({ length: count }, (_, i) => from + i);
          for (const slot of slots) one.insert(slot, hashes[slot] as number);
          many.insertMany(slots, hashes.subarray(from, from + count), count);
        }
        const deleted = new Set<number>();
        for (const pick of deletions) {
          if (names.length === 0) break;
          const slot = pick % names.length;
          if (deleted.has(slot)) continue;
          deleted.add(slot);
          assert.equal(one.delete(slot, hashes[slot] as number), true);
          assert.equal(many.delete(slot, hashes[slot] as number), true);
        }
        assert.equal(many.size, one.size);
        // Keys present and deleted, and keys never inserted (a fresh name under a used hash).
        const probes = [...keys.map((key, slot) => ({ key, hash: hashes[slot] as number })), ...Array.from(hashes.slice(0, 5), (hash) => ({ key: utf8.encode('absent'), hash }))];
        const unindexed = new Uint8Array(probes.length);
        many.markUnindexed(Uint32Array.from(probes, (probe) => probe.hash), probes.length, unindexed);
        probes.forEach(({ key, hash }, i) => {
          const found = many.find(key, 0, key.length, hash);
          assert.equal(found, one.find(key, 0, key.length, hash));
          if (i < keys.length) assert.equal(found, deleted.has(i) ? -1 : i);
          if (unindexed[i] === 1) assert.equal(found, -1, 'marked unindexed, yet held');
          const anyHeld = keys.some((_, slot) => !deleted.has(slot) && hashes[slot] === hash);
          assert.equal(unindexed[i], anyHeld ? 0 : 1, 'unindexed exactly when no held key has the hash');
        });
      },
    ),
    propertyRuns(300),
  );
});

test('reserveTowards rehashes once for the expected keys; every key is still found', () => {
  const keys = Array.from({ length: 600 }, (_, i) => utf8.encode(`key-${i}`));
  const index = new KeyIndex({ keyOf: (slot: number) => keys[slot] as Uint8Array }, 8);
  for (let slot = 0; slot < 2; slot++) index.insert(slot, keyHash(keys[slot] as Uint8Array));
  const small = index.bytesUsed;
  index.reserveTowards(2, 600);
  assert.equal(index.bytesUsed, small, '8 cells hold 4 keys at half load: room for 2 more, no growth');
  index.reserveTowards(3, 600);
  const grown = index.bytesUsed;
  assert.equal(grown, small * 256, 'one rehash to the power of two that holds 600 keys at half load (2048 cells), not to 16');
  for (let slot = 2; slot < 600; slot++) index.insert(slot, keyHash(keys[slot] as Uint8Array));
  assert.equal(index.bytesUsed, grown, 'the 600 went in without another rehash');
  for (let slot = 0; slot < 600; slot++) {
    const key = keys[slot] as Uint8Array;
    assert.equal(index.find(key, 0, key.length, keyHash(key)), slot);
  }
});
