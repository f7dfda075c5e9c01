// How the resident store's columns grow: the capacities a growth goes to, the bytes the columns
// of a capacity take, and the new columns of one growth, each a copy of its old column widened.
// Owned by the main thread, with the store (resident-store.ts) that calls it.
//
// Columns only grow by doubling (to the capacities that growing one slot at a time reaches,
// whatever the batch sizes), except when a replay says how many timers are to come
// (capacityTowards): then one copy into columns of the final size. A growth's new columns are
// typed arrays of their own, or views one after another into one buffer made ahead
// (engine/memory/columns-ahead.ts), columnsBytes(capacity) long, each aligned:
//
//   one buffer for `capacity` slots, each column starting at a multiple of 8 bytes
//   ┌────────────┬────────────┬─────┬───────────────┬────────────┬─────┐
//   │ fireAt f64 │ dueAt f64  │  …  │ keyLength u16 │ index i32  │  …  │
//   └────────────┴────────────┴─────┴───────────────┴────────────┴─────┘
//   0            8·capacity                          then the index columns other structures keep
import assert from 'node:assert/strict';

/** reserveTowards grows the columns by this factor at least. */
const reserveGrowthMin = 1.5;

export type Column = Float64Array | Uint32Array | Uint16Array | Uint8Array | Int32Array;

/** A column's typed-array constructor. */
export interface ColumnType<C extends Column> {
  new (length: number): C;
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): C;
  readonly BYTES_PER_ELEMENT: number;
}

/** What a growth or a shrink makes of one column: its replacement, of the new capacity. */
export type ColumnMaker = <C extends Column>(Type: ColumnType<C>, old: C) => C;

/** `old` copied into a new array `length` long (a free stack, a refcount table: not a column). */
export function widened<C extends Column>(old: C, length: number, make: (length: number) => C): C {
  const next = make(length);
  next.set(old);
  return next;
}

/** The capacity growing one slot at a time reaches to hold `needed` slots: `capacity` doubled until it does. */
export function doubledCapacity(capacity: number, needed: number): number {
  while (capacity < needed) capacity *= 2;
  return capacity;
}

/**
 * The capacity reserveTowards grows to: what the caller expects to hold in the end (at least
 * `needed`), and by half at least, so that a run of low guesses cannot turn growth into a copy
 * per batch.
 */
export function capacityTowards(capacity: number, needed: number, expectedSlots: number): number {
  return Math.max(needed, Math.ceil(expectedSlots), Math.ceil(capacity * reserveGrowthMin));
}

/** Column bytes start at multiples of this, so that every typed array view is aligned. */
const columnAlign = 8;
const aligned = (bytes: number): number => Math.ceil(bytes / columnAlign) * columnAlign;
/** Element sizes of the store's own columns, one entry a column (see resident-store.ts). */
const columnElementBytes = [8, 8, 8, 4, 4, 1, 2, 2, 4, 2, 4, 2, 4, 2, 2];

/**
 * Bytes of one buffer that holds every column for `capacity` slots (ColumnMemory carves it),
 * with `indexColumns` index columns (IndexColumn) besides the store's own.
 */
export function columnsBytes(capacity: number, indexColumns = 0): number {
  let bytes = indexColumns * aligned(capacity * Int32Array.BYTES_PER_ELEMENT);
  for (const elementBytes of columnElementBytes) bytes += aligned(capacity * elementBytes);
  return bytes;
}

/**
 * The new columns of one growth, each a copy of its old column widened to `capacity`: views
 * one after another into `memory` (columnsBytes(capacity) long, zero, made ahead) when given,
 * else a typed array of its own, as `new Float64Array(capacity)` makes.
 */
export class ColumnMemory {
  readonly capacity: number;
  readonly #memory: Uint8Array | undefined;
  #at = 0;

  constructor(memory: Uint8Array | undefined, capacity: number, indexColumns: number) {
    assert.ok(memory === undefined || memory.length >= columnsBytes(capacity, indexColumns), 'column memory too small for its capacity');
    this.#memory = memory;
    this.capacity = capacity;
  }

  /** `old` widened to the capacity, as a `Type` (Float64Array, Uint32Array, …). */
  widen<C extends Column>(Type: ColumnType<C>, old: C): C {
    const next = this.#memory === undefined ? new Type(this.capacity) : new Type(this.#memory.buffer, this.#take(Type.BYTES_PER_ELEMENT), this.capacity);
    next.set(old);
    return next;
  }

  /** The byte offset of the next column, whose elements are `elementBytes` wide. */
  #take(elementBytes: number): number {
    const memory = this.#memory as Uint8Array;
    const at = memory.byteOffset + this.#at;
    this.#at += aligned(this.capacity * elementBytes);
    assert.ok(this.#at <= memory.length, 'more columns carved than columnsBytes counts');
    return at;
  }
}
