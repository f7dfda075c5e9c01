// KeyClaims (the engine's idempotency keys claimed by admits in flight) against a model that
// keeps each claim as (ticket, hash): get(hash) answers a claiming admit's promise exactly while
// some claim on that hash is held, through growth, colliding hashes, repeats within one claim,
// releases in any order and the shrink back once nothing is in flight.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { KeyClaims } from '../../engine/store/key-claims.ts';
import { propertyRuns } from '../helpers/property.ts';

type Op = { kind: 'claim'; hashes: number[] } | { kind: 'release'; pick: number } | { kind: 'get'; hash: number };

// Hashes that share low bits (the table's home cell), and a few far apart.
const hash = fc.oneof(fc.integer({ min: 0, max: 40 }).map((h) => h * 1024), fc.integer({ min: 0, max: 3000 }), fc.constant(0xffffffff));

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.array(hash, { maxLength: 700 }).map((hashes): Op => ({ kind: 'claim', hashes })) },
  { weight: 2, arbitrary: fc.nat().map((pick): Op => ({ kind: 'release', pick })) },
  { weight: 3, arbitrary: hash.map((h): Op => ({ kind: 'get', hash: h })) },
);

test('KeyClaims answers as a list of claims would, through any claims and releases', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
      const claims = new KeyClaims();
      const held: Array<{ ticket: number; hashes: number[]; promise: Promise<void> }> = [];
      const check = (h: number): void => {
        const holders = held.filter((claim) => claim.hashes.includes(h)).map((claim) => claim.promise);
        const got = claims.get(h);
        if (holders.length === 0) assert.equal(got, undefined, `hash ${h} is not claimed`);
        else assert.ok(got !== undefined && holders.includes(got), `hash ${h} answers one of its claiming admits`);
      };
      for (const o of ops) {
        if (o.kind === 'claim') {
          const promise = Promise.resolve();
          held.push({ ticket: claims.claim(o.hashes, promise), hashes: o.hashes, promise });
        } else if (o.kind === 'release' && held.length > 0) {
          const [claim] = held.splice(o.pick % held.length, 1);
          if (claim !== undefined) claims.release(claim.ticket, claim.hashes);
        } else if (o.kind === 'get') check(o.hash);
        assert.equal(claims.size, held.reduce((sum, claim) => sum + claim.hashes.length, 0));
        for (const claim of held) for (const h of claim.hashes.slice(0, 20)) check(h);
      }
    }),
    propertyRuns(300),
  );
});

test('a release of a ticket not in flight is a bug', () => {
  const claims = new KeyClaims();
  const ticket = claims.claim([1, 2], Promise.resolve());
  claims.release(ticket, [1, 2]);
  assert.throws(() => claims.release(ticket, [1, 2]), /not in flight/);
});
