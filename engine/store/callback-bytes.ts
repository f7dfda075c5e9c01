// A timer's callback URLs as the resident store keeps them: one run of bytes after its key in
// the arena, told by one bit of the key's length column (resident-store.ts), so a timer costs
// no column of its own for them. The run says its own length. Plain functions over bytes, no
// state; main thread, with the store (and the spill tier's runs, which hold the same runs).
//
//   callbacks run = callback-length(u16 LE) failure-callback-length(u16 LE)
//                   callback(utf8) failure-callback(utf8)
//                 ; no run at all (empty) when the timer has neither
//
//   arena string of a slot:  payload │ headers │ key │ callbacks run
//
// One run for both URLs keeps a timer without callbacks at no bytes, and a timer with them at
// one string, freed with the rest.
import assert from 'node:assert/strict';
import type { BytesColumn } from '../batch/timer-batch.ts';

/** A URL's length is a u16 in the run. */
export const callbackBytesMax = 2 ** 16 - 1;
/** The run's two lengths. */
export const callbacksRunHeaderBytes = 4;

const utf8 = new TextDecoder();
const noBytes = new Uint8Array(0);

/** Bytes of row `row` of a column. */
function rowBytes(column: BytesColumn, row: number): number {
  return (column.offsets[row + 1] as number) - (column.offsets[row] as number);
}

/** The run's length for these URL lengths: 0 when both are empty. */
export function callbacksRunBytes(callbackBytes: number, failureBytes: number): number {
  return callbackBytes + failureBytes === 0 ? 0 : callbacksRunHeaderBytes + callbackBytes + failureBytes;
}

/** The length of the run that starts at `at` of `bytes` (its header read in place). */
export function callbacksRunBytesAt(bytes: Uint8Array, at: number): number {
  return callbacksRunHeaderBytes + ((bytes[at] as number) | ((bytes[at + 1] as number) << 8)) + ((bytes[at + 2] as number) | ((bytes[at + 3] as number) << 8));
}

function writeRun(into: Uint8Array, at: number, callback: Uint8Array, failureCallback: Uint8Array): void {
  into[at] = callback.length & 0xff;
  into[at + 1] = callback.length >> 8;
  into[at + 2] = failureCallback.length & 0xff;
  into[at + 3] = failureCallback.length >> 8;
  into.set(callback, at + callbacksRunHeaderBytes);
  into.set(failureCallback, at + callbacksRunHeaderBytes + callback.length);
}

/** The run of one timer's URLs (empty: neither); a copy. */
export function packCallbacks(callback: Uint8Array, failureCallback: Uint8Array): Uint8Array {
  const length = callbacksRunBytes(callback.length, failureCallback.length);
  if (length === 0) return noBytes;
  assert.ok(callback.length <= callbackBytesMax && failureCallback.length <= callbackBytesMax, 'callback URL longer than its u16 length');
  const run = new Uint8Array(length);
  writeRun(run, 0, callback, failureCallback);
  return run;
}

/**
 * The batch's key column with each row's callbacks run after its key, and 1 in `hasRun` (by
 * batch row) where a row has one: what the arena copies as the third part of a timer's string.
 * Made once per batch that has callbacks; a batch without them goes in with its keys as they are.
 */
export function keysWithCallbacks(keys: BytesColumn, callback: BytesColumn, failureCallback: BytesColumn, rows: number, hasRun: Uint8Array): BytesColumn {
  const offsets = new Int32Array(rows + 1);
  let total = 0;
  for (let row = 0; row < rows; row++) {
    const run = callbacksRunBytes(rowBytes(callback, row), rowBytes(failureCallback, row));
    hasRun[row] = run === 0 ? 0 : 1;
    total += rowBytes(keys, row) + run;
    offsets[row + 1] = total;
  }
  const values = new Uint8Array(total);
  for (let row = 0; row < rows; row++) {
    const at = offsets[row] as number;
    values.set(keys.values.subarray(keys.offsets[row] as number, keys.offsets[row + 1] as number), at);
    if (hasRun[row] === 0) continue;
    const callbackUrl = callback.values.subarray(callback.offsets[row] as number, callback.offsets[row + 1] as number);
    const failureUrl = failureCallback.values.subarray(failureCallback.offsets[row] as number, failureCallback.offsets[row + 1] as number);
    writeRun(values, at + rowBytes(keys, row), callbackUrl, failureUrl);
  }
  return { values, offsets };
}

/** The callback URL's bytes in a run (empty: none), a view. */
export function callbackBytesOf(run: Uint8Array): Uint8Array {
  if (run.length === 0) return noBytes;
  const length = (run[0] as number) | ((run[1] as number) << 8);
  return run.subarray(callbacksRunHeaderBytes, callbacksRunHeaderBytes + length);
}

/** The failure callback URL's bytes in a run (empty: none), a view. */
export function failureCallbackBytesOf(run: Uint8Array): Uint8Array {
  if (run.length === 0) return noBytes;
  const length = (run[0] as number) | ((run[1] as number) << 8);
  return run.subarray(callbacksRunHeaderBytes + length);
}

/** A URL's bytes as text, null when empty (the timer view's and the follow-up's form). */
export function urlOrNull(bytes: Uint8Array): string | null {
  return bytes.length === 0 ? null : utf8.decode(bytes);
}

/** Whether `bytes` is a whole callbacks run as packCallbacks() makes one (empty included): what a logged run must be. */
export function isCallbacksRun(bytes: Uint8Array): boolean {
  if (bytes.length === 0) return true;
  return bytes.length > callbacksRunHeaderBytes && callbacksRunBytesAt(bytes, 0) === bytes.length;
}
