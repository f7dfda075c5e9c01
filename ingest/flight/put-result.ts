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
//
// On a cluster node each batch is answered by the node's front as POST /v1/timers answers it
// (JSON, cluster ids): putResultOfAnswer makes the same two forms of that answer.
// Main thread, once per admitted batch.
import { Bool, Field, List, Table, tableToIPC, Uint32, Utf8, vectorFromArray } from 'apache-arrow';
import type { Admitted } from '../../engine/engine.ts';
import { admittedToArrow } from '../admitted-arrow.ts';
import { arrowGaveDelay, type DuplicateRowJson } from '../duplicate-answers.ts';

export type PutResultForm = 'counts' | 'ids';

/** The call header that asks for ids, and its value. */
export const idsHeader = { name: 'fermata-ids', value: 'arrow' } as const;

/** `ipc`: the batch as it was put (its schema says whether it gave delay_ms, which a duplicate's `differs` then leaves fire_at out for). */
export function putResultMetadata(admitted: Admitted, form: PutResultForm, ipc: Uint8Array): Uint8Array {
  if (form === 'ids') return admittedToArrow(admitted, admitted.duplicates > 0 && arrowGaveDelay(ipc));
  return Buffer.from(JSON.stringify({ accepted: admitted.rows, duplicates: admitted.duplicates, first_id: admitted.rows === 0 ? null : admitted.idOf(0) }));
}


/** A batch's 201 answer to POST /v1/timers (ids are cluster ids on a cluster node). */
export interface BatchAnswerJson {
  readonly accepted: number;
  readonly duplicates: number;
  readonly ids: readonly string[];
  readonly revisions: readonly number[];
  /** Rows numbered as in the batch; `differs` already as the row asked (without fire_at for a delay_ms row). */
  readonly duplicate_rows: readonly DuplicateRowJson[];
}

/** The PutResult app_metadata of a batch the HTTP API answered `answer`: the same JSON or Arrow as putResultMetadata gives. */
export function putResultOfAnswer(answer: BatchAnswerJson, form: PutResultForm): Uint8Array {
  if (form === 'counts') return Buffer.from(JSON.stringify({ accepted: answer.accepted, duplicates: answer.duplicates, first_id: answer.ids[0] ?? null }));
  const rows = answer.ids.length;
  const duplicate = new Array<boolean>(rows).fill(false);
  const states = new Array<string | null>(rows).fill(null);
  const differs = new Array<readonly string[] | null>(rows).fill(null);
  for (const row of answer.duplicate_rows) {
    duplicate[row.row] = true;
    states[row.row] = row.state;
    differs[row.row] = row.differs;
  }
  const table = new Table({
    id: vectorFromArray(answer.ids, new Utf8()),
    duplicate: vectorFromArray(duplicate, new Bool()),
    state: vectorFromArray(states, new Utf8()),
    differs: vectorFromArray(differs, new List(new Field('item', new Utf8(), false))),
    revision: vectorFromArray(answer.revisions, new Uint32()),
  });
  return tableToIPC(table, 'stream');
}
