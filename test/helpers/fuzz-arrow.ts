// Hostile Arrow IPC streams for POST /v1/timers: byte-level mutations (flip, insert, delete,
// truncate, splice, overwrite with a boundary integer) of seed streams. Seeds are timer batches
// written by apache-arrow and by pyarrow in the shapes clients send (Timestamp of any unit or
// Int64 fire_at, delay_ms, dictionary or plain Utf8 targets, nulls, several record batches), and Arrow's own test streams
// in test/fixtures/arrow-ipc (malformed OSS-Fuzz inputs, foreign schemas, LZ4/ZSTD).
// Positions are drawn as naturals and taken modulo the current length, so fast-check can shrink
// a failing case to few, small operations.
import { readdirSync, readFileSync } from 'node:fs';
import { Int32, Int64, RecordBatch, Table, tableToIPC, Utf8, vectorFromArray, Binary } from 'apache-arrow';
import fc from 'fast-check';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { batchToArrow } from './arrow.ts';
import { arrowIpcTestData } from './fixtures.ts';

export interface ArrowSeed {
  readonly name: string;
  readonly bytes: Uint8Array;
}

const hourMs = 3_600_000;
/** Far ahead, so an accepted timer is never delivered during a run. */
const farFireAtMs = Date.UTC(2033, 0, 1);

function specs(target: string, rows: number): TimerSpec[] {
  return Array.from({ length: rows }, (_, row) => ({
    fireAtMs: farFireAtMs + row * 1_000,
    target: `${target}/arrow/${row % 3}`,
    payload: row % 2 === 0 ? `payload ${row}` : Uint8Array.of(0, 1, 2, row & 0xff),
    ...(row % 4 === 0 ? { headers: { 'x-row': String(row) } } : {}),
    ...(row % 5 === 0 ? { key: `arrow-seed-${row}` } : {}),
    ...(row % 3 === 0 ? { queue: 'fuzz' } : {}),
  }));
}

/** Int64 fire_at, plain Utf8 targets, nullable payload and key. */
function plainColumnsSeed(target: string): Uint8Array {
  const rows = 4;
  return tableToIPC(
    new Table({
      fire_at: vectorFromArray(Array.from({ length: rows }, (_, row) => BigInt(farFireAtMs + row)), new Int64()),
      target: vectorFromArray(Array.from({ length: rows }, (_, row) => `${target}/plain/${row}`), new Utf8()),
      payload: vectorFromArray(['a', null, 'ccc', null], new Utf8()),
      key: vectorFromArray([null, 'plain-1', null, 'plain-3'], new Utf8()),
    }),
    'stream',
  );
}

/** delay_ms as Int32 over two record batches, Binary payloads. */
function twoBatchesSeed(target: string): Uint8Array {
  const part = (from: number): Table =>
    new Table({
      delay_ms: vectorFromArray([hourMs + from, 2 * hourMs + from], new Int32()),
      target: vectorFromArray([`${target}/two/${from}`, `${target}/two/${from + 1}`], new Utf8()),
      payload: vectorFromArray([Uint8Array.of(from), Uint8Array.of()], new Binary()),
    });
  const [first, second] = [part(0), part(2)];
  return tableToIPC(new Table([...first.batches, ...second.batches] as RecordBatch[]), 'stream');
}

function testDataSeeds(): ArrowSeed[] {
  const seeds: ArrowSeed[] = [];
  for (const folder of ['valid', 'malformed', 'compressed']) {
    const dir = new URL(`${folder}/`, arrowIpcTestData);
    for (const name of readdirSync(dir).sort()) seeds.push({ name: `${folder}/${name}`, bytes: readFileSync(new URL(name, dir)) });
  }
  return seeds;
}

/** Timer batches written by pyarrow (test/fixtures/pyarrow_fuzz_seeds.py), committed so no Python is needed to fuzz them. */
const pyarrowSeedDir = new URL('../fixtures/arrow/pyarrow-seeds/', import.meta.url);

function pyarrowSeeds(): ArrowSeed[] {
  return readdirSync(pyarrowSeedDir)
    .sort()
    .map((name) => ({ name: `pyarrow/${name}`, bytes: readFileSync(new URL(name, pyarrowSeedDir)) }));
}

/** Every seed: fermata-shaped streams written by apache-arrow and by pyarrow first, then Arrow's test data. */
export function arrowSeeds(target: string): ArrowSeed[] {
  return [
    { name: 'timers-1', bytes: batchToArrow(batchFromSpecs(specs(target, 1))) },
    { name: 'timers-5', bytes: batchToArrow(batchFromSpecs(specs(target, 5))) },
    { name: 'timers-200', bytes: batchToArrow(batchFromSpecs(specs(target, 200))) },
    { name: 'plain-columns', bytes: plainColumnsSeed(target) },
    { name: 'two-batches', bytes: twoBatchesSeed(target) },
    ...pyarrowSeeds(),
    ...testDataSeeds(),
  ];
}

/** How many of arrowSeeds' first entries are fermata-shaped (valid adds, written by apache-arrow or pyarrow). */
export const writtenSeedCount = 5 + pyarrowSeeds().length;

export type ByteMutation =
  | { readonly kind: 'flip'; readonly at: number; readonly bit: number }
  | { readonly kind: 'insert'; readonly at: number; readonly bytes: Uint8Array }
  | { readonly kind: 'delete'; readonly at: number; readonly length: number }
  | { readonly kind: 'truncate'; readonly at: number }
  | { readonly kind: 'splice'; readonly at: number; readonly other: number; readonly from: number }
  | { readonly kind: 'overwrite32'; readonly at: number; readonly value: number };

/** Values that sit on the edges of Arrow's lengths, offsets and counts. */
const boundaryInt32s = [0, 1, -1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff, -0x80000000, 0x10000, 8, 24, 0xffffffff | 0];

/** Mostly in the first 512 bytes, where the schema and message headers live. */
const position = fc.oneof(fc.nat({ max: 511 }), fc.nat());

const byteMutation: fc.Arbitrary<ByteMutation> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('flip' as const), at: position, bit: fc.integer({ min: 0, max: 7 }) }) },
  fc.record({ kind: fc.constant('insert' as const), at: position, bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }) }),
  fc.record({ kind: fc.constant('delete' as const), at: position, length: fc.integer({ min: 1, max: 64 }) }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('splice' as const), at: position, other: fc.nat(), from: fc.nat() }),
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('overwrite32' as const), at: position, value: fc.constantFrom(...boundaryInt32s) }) },
);

export interface ArrowCase {
  readonly seed: number;
  readonly mutations: readonly ByteMutation[];
  /** Ask for the Arrow answer (id and duplicate columns) instead of JSON. */
  readonly acceptArrow: boolean;
}

/** A seed (fermata-shaped ones twice as often as the test data) and 1–4 mutations of it. */
export function arrowCase(seedCount: number): fc.Arbitrary<ArrowCase> {
  const seed = fc.oneof({ weight: 2, arbitrary: fc.nat({ max: writtenSeedCount - 1 }) }, { weight: 1, arbitrary: fc.nat({ max: seedCount - 1 }) });
  return fc.record({ seed, mutations: fc.array(byteMutation, { minLength: 1, maxLength: 4 }), acceptArrow: fc.boolean() });
}

function mutate(bytes: Uint8Array, mutation: ByteMutation, seeds: readonly ArrowSeed[]): Uint8Array {
  const at = mutation.at % (bytes.length + 1);
  switch (mutation.kind) {
    case 'flip': {
      if (bytes.length === 0) return bytes;
      const copy = Uint8Array.from(bytes);
      const index = at % copy.length;
      copy[index] = (copy[index] as number) ^ (1 << mutation.bit);
      return copy;
    }
    case 'insert':
      return concat(bytes.subarray(0, at), mutation.bytes, bytes.subarray(at));
    case 'delete':
      return concat(bytes.subarray(0, at), bytes.subarray(at + mutation.length));
    case 'truncate':
      return bytes.subarray(0, at);
    case 'splice': {
      // This stream up to `at`, then another seed from `from` on: a header of one with the body of another.
      const other = (seeds[mutation.other % seeds.length] as ArrowSeed).bytes;
      return concat(bytes.subarray(0, at), other.subarray(mutation.from % (other.length + 1)));
    }
    case 'overwrite32': {
      if (bytes.length < 4) return bytes;
      const copy = Uint8Array.from(bytes);
      new DataView(copy.buffer).setInt32(at % (copy.length - 3), mutation.value, true);
      return copy;
    }
  }
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** The body a case stands for. */
export function arrowCaseBytes(fuzzCase: ArrowCase, seeds: readonly ArrowSeed[]): Uint8Array {
  const seed = seeds[fuzzCase.seed % seeds.length] as ArrowSeed;
  return fuzzCase.mutations.reduce((bytes, mutation) => mutate(bytes, mutation, seeds), seed.bytes);
}
