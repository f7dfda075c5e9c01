// Timer ids: 24 characters of lowercase Crockford base32 carrying 120 bits, big-endian:
//
//   bits 119..72  log sequence of the record that added the timer (48)
//   bits  71..48  row of the timer within that record's batch       (24)
//   bits  47..0   the fire time the timer was added with, epoch ms  (48)
//
// The alphabet is in ASCII order and the sequence comes first, so ids sort by creation.
// (sequence, row) names a timer exactly; the fire time says where a timer that is not in
// memory lives on disk (its spill bucket) without a per-timer map. docs/format/ids.md.
import assert from 'node:assert/strict';

export const idAlphabet = '0123456789abcdefghjkmnpqrstvwxyz';
export const idLength = 24;
export const idRowMax = 2 ** 24 - 1;
export const idSequenceMax = 2 ** 48 - 1;
export const idFireAtMax = 2 ** 48 - 1;

const valueOf = new Int8Array(128).fill(-1);
for (let i = 0; i < idAlphabet.length; i++) valueOf[idAlphabet.charCodeAt(i)] = i;

export interface TimerIdParts {
  readonly seq: number;
  readonly row: number;
  readonly fireAtMs: number;
}

const twoTo24 = 2 ** 24;

/** Encodes 48 + 24 + 48 bits as 24 characters (5 bits each), most significant first. */
export function encodeTimerId(seq: number, row: number, fireAtMs: number): string {
  encodeTimerIdInto(scratch, 0, seq, row, fireAtMs);
  const c = scratch;
  // Each code as its own argument: spreading the array (`...scratch`) goes through its iterator
  // and cost 580 ns an id against 40 (measured), a fifth of a single admit's CPU.
  return String.fromCharCode(
    c[0] as number, c[1] as number, c[2] as number, c[3] as number, c[4] as number, c[5] as number, c[6] as number, c[7] as number,
    c[8] as number, c[9] as number, c[10] as number, c[11] as number, c[12] as number, c[13] as number, c[14] as number, c[15] as number,
    c[16] as number, c[17] as number, c[18] as number, c[19] as number, c[20] as number, c[21] as number, c[22] as number, c[23] as number,
  );
}

/** The id's 24 ASCII characters as bytes at `out[at…at+24)`: no string, for ids written into buffers. */
export function encodeTimerIdInto(out: Uint8Array, at: number, seq: number, row: number, fireAtMs: number): void {
  // Plain conditions, assert only on failure: a template message would be built on every call
  // (this runs once per timer handed to a delivery worker).
  if (!(Number.isInteger(seq) && seq >= 0 && seq <= idSequenceMax)) assert.fail(`sequence ${seq} out of id range`);
  if (!(Number.isInteger(row) && row >= 0 && row <= idRowMax)) assert.fail(`row ${row} out of id range`);
  if (!(Number.isInteger(fireAtMs) && fireAtMs >= 0 && fireAtMs <= idFireAtMax)) assert.fail(`fire time ${fireAtMs} out of id range`);
  // 120 bits are three 40-bit groups of 8 characters each, all exact in float64 arithmetic:
  //   a = seq[47..8]   b = seq[7..0] row[23..0] fire[47..40]   c = fire[39..0]
  const seqHigh = Math.floor(seq / twoTo24);
  const seqLow = seq % twoTo24;
  const fireHigh = Math.floor(fireAtMs / twoTo24);
  const fireLow = fireAtMs % twoTo24;
  putGroup(out, at, seqHigh * 2 ** 16 + Math.floor(seqLow / 2 ** 8));
  putGroup(out, at + 8, (seqLow % 2 ** 8) * 2 ** 32 + row * 2 ** 8 + Math.floor(fireHigh / 2 ** 16));
  putGroup(out, at + 16, (fireHigh % 2 ** 16) * twoTo24 + fireLow);
}

const scratch = new Uint8Array(idLength);
const alphabetCodes = Uint8Array.from(idAlphabet, (char) => char.charCodeAt(0));
const twoTo20 = 2 ** 20;

/**
 * A 40-bit group as 8 base-32 characters, most significant first: split into two 20-bit halves
 * of four characters each, so the digits come from integer shifts, not float division.
 */
function putGroup(out: Uint8Array, at: number, group: number): void {
  const high = Math.floor(group / twoTo20);
  const low = group - high * twoTo20;
  out[at] = alphabetCodes[(high >>> 15) & 31] as number;
  out[at + 1] = alphabetCodes[(high >>> 10) & 31] as number;
  out[at + 2] = alphabetCodes[(high >>> 5) & 31] as number;
  out[at + 3] = alphabetCodes[high & 31] as number;
  out[at + 4] = alphabetCodes[(low >>> 15) & 31] as number;
  out[at + 5] = alphabetCodes[(low >>> 10) & 31] as number;
  out[at + 6] = alphabetCodes[(low >>> 5) & 31] as number;
  out[at + 7] = alphabetCodes[low & 31] as number;
}

/** The parts of a well-formed id, or undefined for anything else (wrong length or alphabet). */
export function decodeTimerId(id: string): TimerIdParts | undefined {
  if (id.length !== idLength) return undefined;
  const groups = [0, 0, 0];
  for (let i = 0; i < idLength; i++) {
    const code = id.charCodeAt(i);
    const value = code < 128 ? (valueOf[code] as number) : -1;
    if (value < 0) return undefined;
    const g = Math.floor(i / 8);
    groups[g] = (groups[g] as number) * 32 + value;
  }
  const [a, b, c] = groups as [number, number, number];
  const seq = Math.floor(a / 2 ** 16) * twoTo24 + (a % 2 ** 16) * 2 ** 8 + Math.floor(b / 2 ** 32);
  const row = Math.floor(b / 2 ** 8) % twoTo24;
  const fireAtMs = (b % 2 ** 8) * 2 ** 40 + c;
  return { seq, row, fireAtMs };
}
