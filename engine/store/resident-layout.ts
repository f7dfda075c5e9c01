// The shape of one resident timer (resident-store.ts): the limits its columns' widths set, how a
// handle splits into generation and slot, and the types callers hand the store and read back.
// Constants, types and one check; no state. Used on the main thread, with the store.
//
//   handle = generation · 2^28 + slot      (generation ≥ 1, so 0 is never a handle)
//
//   keyLength u16:  [ 1 bit: a callbacks run follows the key | 15 bits: the key's bytes ]
import assert from 'node:assert/strict';
import type { TimerBatch } from '../batch/timer-batch.ts';
import { arenaSlabCountMax } from './byte-arena.ts';

/** Low bits of a handle that carry the slot. */
export const residentSlotBits = 28;
/** Slots a handle can address: the ceiling for capacityMax. */
export const residentCapacityLimit = 2 ** residentSlotBits;
/** Highest generation that still fits a safe-integer handle; a slot that reaches it is retired. */
export const residentGenerationMax = 2 ** (53 - residentSlotBits) - 1;
/** queueIndex is a u16 column. */
export const residentQueueCountMax = 2 ** 16;
/** headersLength and keyLength are u16 columns. */
export const residentHeadersBytesMax = 2 ** 16 - 1;
/** keyLength's top bit says a callbacks run follows the key (callback-bytes.ts). */
export const residentKeyBytesMax = 2 ** 15 - 1;
/** The bit of keyLength above the key's length: a callbacks run follows the key. */
export const keyHasCallbacksBit = 2 ** 15;

/** A handle's generation counts in units of this: handle = generation · residentSlotSpan + slot. */
export const residentSlotSpan = 2 ** residentSlotBits;
// bytesSlab is a u16 column.
assert.ok(arenaSlabCountMax <= 2 ** 16, 'an arena slab id must fit the u16 bytesSlab column');

/** A column to read by slot; write through the store's setters. */
export interface ReadonlyColumn {
  readonly [slot: number]: number;
  readonly length: number;
}

export interface TimerFields {
  readonly key?: Uint8Array;
  readonly fireAt: number;
  readonly logSeq: number;
  readonly row: number;
  readonly queueIndex: number;
  readonly target: string;
  readonly payload: Uint8Array;
  readonly headers: Uint8Array;
  /** Both callback URLs as one run (callback-bytes.ts's packCallbacks); empty: none. */
  readonly callbacks?: Uint8Array;
}

/** The columns of a batch that allocateRows() reads. */
export type BatchRows = Pick<TimerBatch, 'fireAtMs' | 'queueIndex' | 'targetIndex' | 'payload' | 'headers' | 'keys' | 'callback' | 'failureCallback'>;

/**
 * An Int32 column the store keeps for another structure over its slots (a timer heap's
 * entries and positions): `capacity` long, zero when new, grown with the store's own columns
 * (and made ahead with them, so a growth stops for a copy and no page faults). Its owner reads
 * `array` again after anything that may grow or shrink the store. A column holds a value for
 * each slot (`bySlot`: a heap's positions), or slot numbers in its first `count` entries
 * (`slots`: a heap's entries); shrink() moves each kind as it must.
 */
export interface IndexColumn {
  array: Int32Array;
  readonly holds: IndexColumnKind;
}

export type IndexColumnKind = 'bySlot' | 'slots';

/**
 * Asserts that rows rows[i] (i when `rows` is undefined), i < count, are rows of the batch with
 * a finite fire time and headers and key that fit their u16 length columns: checked for the
 * whole batch before any row is allocated. A plain condition per row, assert only on failure
 * (assert.ok's rest arguments would cost an array per call).
 */
export function assertRowsFit(batch: BatchRows, rows: Int32Array | undefined, count: number): void {
  const { fireAtMs, headers, keys } = batch;
  for (let i = 0; i < count; i++) {
    const row = rows === undefined ? i : (rows[i] as number);
    const time = fireAtMs[row] as number;
    // NaN and ±Infinity fail this, and so does a row past the batch's end (undefined).
    if (!(time - time === 0)) assert.fail('fireAt must be a finite number of ms');
    const headersBytes = (headers.offsets[row + 1] as number) - (headers.offsets[row] as number);
    const keyBytes = (keys.offsets[row + 1] as number) - (keys.offsets[row] as number);
    if (!(headersBytes <= residentHeadersBytesMax && keyBytes <= residentKeyBytesMax)) assert.fail('headers or key longer than its u16 length column');
  }
}
