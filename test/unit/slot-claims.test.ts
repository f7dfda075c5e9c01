// SlotClaims (the engine's slots whose delivery outcomes are being logged) against a model that
// keeps each claim as (ticket, slots): a claim is taken only when none of its slots is held
// already nor repeated in it (all or nothing), get(slot) answers the holding claim's promise
// exactly while it is held, through growth of the bits past any slot, releases in any order,
// and questions about slots held and not held between them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { SlotClaims } from '../../engine/store/slot-claims.ts';
import { propertyRuns } from '../helpers/property.ts';

type Op = { kind: 'claim'; slots: number[] } | { kind: 'release'; pick: number } | { kind: 'get'; slot: number };

// Dense low slots (many claims meet), word edges, and a few far past the bits' first size.
const slot = fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 8 }).map((w) => w * 32 + 31), fc.integer({ min: 30_000, max: 3_000_000 }));

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.array(slot, { maxLength: 200 }).map((slots): Op => ({ kind: 'claim', slots })) },
  { weight: 2, arbitrary: fc.nat().map((pick): Op => ({ kind: 'release', pick })) },
  { weight: 3, arbitrary: slot.map((s): Op => ({ kind: 'get', slot: s })) },
);

test('SlotClaims answers as a list of claims would, through any claims and releases', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
      const claims = new SlotClaims();
      const held: Array<{ ticket: number; slots: number[]; promise: Promise<void> }> = [];
      const check = (s: number): void => {
        const holder = held.find((claim) => claim.slots.includes(s));
        assert.equal(claims.get(s), holder?.promise, holder === undefined ? `slot ${s} is not claimed` : `slot ${s} answers its claim's promise`);
      };
      for (const o of ops) {
        if (o.kind === 'claim') {
          const promise = Promise.resolve();
          const taken = new Set(held.flatMap((claim) => claim.slots));
          const free = new Set(o.slots).size === o.slots.length && o.slots.every((s) => !taken.has(s));
          const ticket = claims.claimUnique(Int32Array.from(o.slots), promise);
          assert.equal(ticket >= 0, free, free ? 'slots all free and distinct: claimed' : 'a slot held already or repeated: nothing claimed');
          if (ticket >= 0) held.push({ ticket, slots: o.slots, promise });
          // A refused claim leaves no slot of its own behind.
          else for (const s of o.slots) check(s);
        } else if (o.kind === 'release' && held.length > 0) {
          const [claim] = held.splice(o.pick % held.length, 1);
          if (claim !== undefined) {
            claims.release(claim.ticket);
            for (const s of claim.slots) check(s);
          }
        } else if (o.kind === 'get') check(o.slot);
        assert.equal(claims.size, held.reduce((sum, claim) => sum + claim.slots.length, 0));
        for (const claim of held) for (const s of claim.slots.slice(0, 20)) check(s);
      }
    }),
    propertyRuns(300),
  );
});

test('a release of a ticket not in flight, or a negative slot, is a bug', () => {
  const claims = new SlotClaims();
  const ticket = claims.claimUnique(Int32Array.of(1, 2), Promise.resolve());
  claims.release(ticket);
  assert.throws(() => claims.release(ticket), /not in flight/);
  assert.throws(() => claims.claimUnique(Int32Array.of(3, -1), Promise.resolve()), /slot -1 claimed/);
  assert.equal(claims.get(3), undefined, 'nothing of the refused claim is held');
});
