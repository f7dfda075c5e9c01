// A timer's callback URLs as the resident store keeps them: one run of bytes after its key in
// the arena, read through one u16 length column (resident-store.ts). Plain functions over
// bytes, no state; main thread, with the store.
//
//   callbacks run = callback-length(u16 LE) callback(utf8) failure-callback(utf8)
//                 ; empty (length 0) when the timer has neither
//
//   arena string of a slot:  payload │ headers │ key │ callbacks run
//
// One run for both URLs keeps a timer without callbacks at 2 bytes of column and no arena
// bytes, and a timer with them at one string, freed with the rest.
import assert from 'node:assert/strict';
import type { BytesColumn } from '../batch/timer-batch.ts';

/** The length column is a u16: a run of both URLs and their 2-byte split fits it when each URL is at most this long. */
export const callbackBytesMax = (2 ** 16 - 1 - 2) >> 1;

const utf8 = new TextDecoder();
const noBytes = new Uint8Array(0);

/** Bytes of row `row` of a column. */
function rowBytes(column: BytesColumn, row: number): number {
  return (column.offsets[row + 1] as number) - (column.offsets[row] as number);
}

/** The run's length for these URL lengths: 0 when both are empty. */
export function callbacksRunBytes(callbackBytes: number, failureBytes: number): number {
  return callbackBytes + failureBytes === 0 ? 0 : 2 + callbackBytes + failureBytes;
}

/** The run of one timer's URLs (empty: neither); a copy. */
export function packCallbacks(callback: Uint8Array, failureCallback: Uint8Array): Uint8Array {
  const length = callbacksRunBytes(callback.length, failureCallback.length);
  if (length === 0) return noBytes;
  assert.ok(callback.length <= callbackBytesMax && failureCallback.length <= callbackBytesMax, 'callback URL longer than the store holds');
  const run = new Uint8Array(length);
  run[0] = callback.length & 0xff;
  run[1] = callback.length >> 8;
  run.set(callback, 2);
  run.set(failureCallback, 2 + callback.length);
  return run;
}

/**
 * The batch's key column with each row's callbacks run after its key, and each row's run length
 * in `runLengths` (by batch row): what the arena copies as the third part of a timer's string.
 * Made once per batch that has callbacks; a batch without them goes in with its keys as they are.
 */
export function keysWithCallbacks(keys: BytesColumn, callback: BytesColumn, failureCallback: BytesColumn, rows: number, runLengths: Uint16Array): BytesColumn {
  const offsets = new Int32Array(rows + 1);
  let total = 0;
  for (let row = 0; row < rows; row++) {
    const run = callbacksRunBytes(rowBytes(callback, row), rowBytes(failureCallback, row));
    runLengths[row] = run;
    total += rowBytes(keys, row) + run;
    offsets[row + 1] = total;
  }
  const values = new Uint8Array(total);
  for (let row = 0; row < rows; row++) {
    let at = offsets[row] as number;
    values.set(keys.values.subarray(keys.offsets[row] as number, keys.offsets[row + 1] as number), at);
    at += rowBytes(keys, row);
    if (runLengths[row] === 0) continue;
    const callbackBytes = rowBytes(callback, row);
    values[at] = callbackBytes & 0xff;
    values[at + 1] = callbackBytes >> 8;
    values.set(callback.values.subarray(callback.offsets[row] as number, callback.offsets[row + 1] as number), at + 2);
    values.set(failureCallback.values.subarray(failureCallback.offsets[row] as number, failureCallback.offsets[row + 1] as number), at + 2 + callbackBytes);
  }
  return { values, offsets };
}

/** The callback URL's bytes in a run (empty: none), a view. */
export function callbackBytesOf(run: Uint8Array): Uint8Array {
  if (run.length === 0) return noBytes;
  const length = (run[0] as number) | ((run[1] as number) << 8);
  return run.subarray(2, 2 + length);
}

/** The failure callback URL's bytes in a run (empty: none), a view. */
export function failureCallbackBytesOf(run: Uint8Array): Uint8Array {
  if (run.length === 0) return noBytes;
  const length = (run[0] as number) | ((run[1] as number) << 8);
  return run.subarray(2 + length);
}

/** A URL's bytes as text, null when empty (the timer view's and the follow-up's form). */
export function urlOrNull(bytes: Uint8Array): string | null {
  return bytes.length === 0 ? null : utf8.decode(bytes);
}
