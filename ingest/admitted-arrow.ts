// An admitted batch's ids as Arrow: the answer to an Arrow add over HTTP (Accept: Arrow) and a
// Flight PutResult's metadata when the client asks for ids. Main thread.
//
//   id Utf8 · duplicate Bool · state Utf8 (null: a new row) · differs List<Utf8> (null: a new row)
//   · revision Uint32 (1: a new row; the original's now for a duplicate)
//
// `state` and `differs` are the original's, for a duplicate row (ingest/duplicate-answers.ts);
// a batch without duplicates gets them as all-null columns, built without a look at any row.
import { Bool, Field, List, makeData, makeVector, Table, tableToIPC, Uint32, Utf8 } from 'apache-arrow';
import type { Admitted } from '../engine/engine.ts';
import { idLength } from '../engine/ids.ts';
import { type DelayRows, differsAsAsked, gaveDelay } from './duplicate-answers.ts';

const encoder = new TextEncoder();

/** The answer columns of an admitted batch as an Arrow IPC stream, row-aligned with the input. */
export function admittedToArrow(admitted: Admitted, delayRows: DelayRows): Uint8Array {
  const rows = admitted.rows;
  const offsets = new Int32Array(rows + 1);
  const ids = Buffer.allocUnsafe(rows * idLength);
  const duplicates = new Uint8Array(Math.ceil(rows / 8));
  for (let row = 0; row < rows; row++) {
    ids.write(admitted.idOf(row), row * idLength, idLength, 'latin1');
    offsets[row + 1] = (row + 1) * idLength;
    // Arrow packs booleans eight a byte, least significant bit first.
    if (admitted.isDuplicate(row)) duplicates[row >> 3] = (duplicates[row >> 3] as number) | (1 << (row & 7));
  }
  const { states, differs } = originalsColumns(admitted, delayRows, duplicates);
  const revisions = new Uint32Array(rows).fill(1);
  for (let row = 0; admitted.duplicates > 0 && row < rows; row++) revisions[row] = admitted.revisionOf(row);
  const table = new Table({
    id: makeVector(makeData({ type: new Utf8(), length: rows, valueOffsets: offsets, data: ids })),
    duplicate: makeVector(makeData({ type: new Bool(), length: rows, data: duplicates })),
    state: makeVector(states),
    differs: makeVector(differs),
    revision: makeVector(makeData({ type: new Uint32(), length: rows, data: revisions })),
  });
  return tableToIPC(table, 'stream');
}

/**
 * The state and differs columns: valid (not null) exactly where a row is a duplicate, so
 * `duplicate`'s bits are their validity, each column with a copy of its own (apache-arrow's
 * writer miscounts the body when one array backs two buffers: pyarrow then cannot read it).
 */
function originalsColumns(admitted: Admitted, delayRows: DelayRows, duplicateBits: Uint8Array) {
  const rows = admitted.rows;
  const stateOffsets = new Int32Array(rows + 1);
  const listOffsets = new Int32Array(rows + 1);
  // State and field names are ASCII: a string's length is its byte length.
  let stateText = '';
  const names: string[] = [];
  for (let row = 0; admitted.duplicates > 0 && row < rows; row++) {
    const original = admitted.duplicateOf(row);
    if (original !== undefined) {
      stateText += original.state;
      names.push(...differsAsAsked(original, gaveDelay(delayRows, row)));
    }
    stateOffsets[row + 1] = stateText.length;
    listOffsets[row + 1] = names.length;
  }
  const nullCount = rows - admitted.duplicates;
  const states = makeData({ type: new Utf8(), length: rows, nullCount, nullBitmap: duplicateBits.slice(), valueOffsets: stateOffsets, data: encoder.encode(stateText) });
  const nameOffsets = new Int32Array(names.length + 1);
  for (let i = 0; i < names.length; i++) nameOffsets[i + 1] = (nameOffsets[i] as number) + (names[i] as string).length;
  const child = makeData({ type: new Utf8(), length: names.length, valueOffsets: nameOffsets, data: encoder.encode(names.join('')) });
  const differs = makeData({ type: new List(new Field('item', new Utf8(), false)), length: rows, nullCount, nullBitmap: duplicateBits.slice(), valueOffsets: listOffsets, child });
  return { states, differs };
}
