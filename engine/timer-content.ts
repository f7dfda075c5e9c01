// What a timer carries to its target, as its views show it: its extra headers and its payload.
// The store and a spilled run keep the headers as the JSON object text the add gave (empty: none)
// and the payload as bytes in an arena or a decoded bucket; a view decodes the one timer it shows
// and copies its payload, so the view outlives the slot or the bucket. Main thread.
import type { ResidentStore } from './store/resident-store.ts';
import { bytesOf, type RunRows } from './spill/run-rows.ts';
import type { TimerHeaders, TimerView } from './types.ts';

const utf8 = new TextDecoder();
const noHeaders: TimerHeaders = Object.freeze({});

/** Headers from their stored JSON object text; {} when there is none. */
export function headersOf(bytes: Uint8Array): TimerHeaders {
  return bytes.length === 0 ? noHeaders : (JSON.parse(utf8.decode(bytes)) as TimerHeaders);
}

/** A resident timer's headers and payload (copied out of the arena). */
export function residentContent(store: ResidentStore, slot: number): Pick<TimerView, 'headers' | 'payload'> {
  return { headers: headersOf(store.headersOf(slot)), payload: new Uint8Array(store.payloadOf(slot)) };
}

/** Row `index` of a decoded bucket's headers and payload (copied out of the bucket). */
export function spilledContent(rows: RunRows, index: number): Pick<TimerView, 'headers' | 'payload'> {
  return { headers: headersOf(bytesOf(rows.headers, index)), payload: new Uint8Array(bytesOf(rows.payload, index)) };
}
