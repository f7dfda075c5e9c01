// What each PutResult of a DoPut carries in app_metadata, one per record batch, in stream order:
//
//   default                     JSON {"accepted": N, "duplicates": D, "first_id": "…"|null}: the
//                               HTTP API's default answer plus the first row's id
//   call header fermata-ids: arrow   an Arrow IPC stream with one row per row of the batch, `id`
//                               (Utf8), `duplicate` (Bool), `state` (Utf8), `differs`
//                               (List<Utf8>) and `revision` (Uint32): the HTTP API's Arrow answer (Accept:
//                               application/vnd.apache.arrow.stream); pyarrow reads it with
//                               pa.ipc.open_stream(metadata)
//
// Ids are opt-in because spelling them costs about 2 µs a row on the main thread (measured:
// 10,000 ids ≈ 18 ms), which halved DoPut throughput in bench/flight.ts when always on.
// Main thread, once per admitted batch.
import type { Admitted } from '../../engine/engine.ts';
import { admittedToArrow } from '../admitted-arrow.ts';
import { arrowGaveDelay } from '../duplicate-answers.ts';

export type PutResultForm = 'counts' | 'ids';

/** The call header that asks for ids, and its value. */
export const idsHeader = { name: 'fermata-ids', value: 'arrow' } as const;

/** `ipc`: the batch as it was put (its schema says whether it gave delay_ms, which a duplicate's `differs` then leaves fire_at out for). */
export function putResultMetadata(admitted: Admitted, form: PutResultForm, ipc: Uint8Array): Uint8Array {
  if (form === 'ids') return admittedToArrow(admitted, admitted.duplicates > 0 && arrowGaveDelay(ipc));
  return Buffer.from(JSON.stringify({ accepted: admitted.rows, duplicates: admitted.duplicates, first_id: admitted.rows === 0 ? null : admitted.idOf(0) }));
}

