// An admitted batch's ids as Arrow: the answer to an Arrow add over HTTP (Accept: Arrow) and a
// Flight PutResult's metadata when the client asks for ids. Main thread.
import { Bool, makeData, makeVector, Table, tableToIPC, Utf8 } from 'apache-arrow';
import type { Admitted } from '../engine/engine.ts';
import { idLength } from '../engine/ids.ts';

/** The id and duplicate columns of an admitted batch as an Arrow IPC stream, row-aligned with the input. */
export function admittedToArrow(admitted: Admitted): Uint8Array {
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
  const table = new Table({
    id: makeVector(makeData({ type: new Utf8(), length: rows, valueOffsets: offsets, data: ids })),
    duplicate: makeVector(makeData({ type: new Bool(), length: rows, data: duplicates })),
  });
  return tableToIPC(table, 'stream');
}
