// The JSON answer to a batch add with no duplicate row (POST /v1/timers with NDJSON or Arrow,
// routes/timers.ts), written as bytes: {accepted, duplicates, ids, revisions, duplicate_rows}
// with every id written straight into the body (Admitted.idInto) and every revision 1, instead
// of a string an id and JSON.stringify over an object of two 10,000-element arrays. Same bytes
// as JSON.stringify would give (ids are ASCII from the id alphabet: nothing to escape).
// Decision 0036 has the measurement. A batch with duplicates is answered by the route's object.
// Main thread.
import type { Admitted } from '../../engine/engine.ts';
import { idLength } from '../../engine/ids.ts';

const quote = 0x22;
const comma = 0x2c;
const one = 0x31;

/** The answer's bytes; `admitted` must have no duplicate row. */
export function newRowsAnswer(admitted: Admitted): Buffer {
  if (admitted.duplicates !== 0) throw new Error('newRowsAnswer answers batches without duplicates only');
  const rows = admitted.rows;
  const head = `{"accepted":${rows},"duplicates":0,"ids":[`;
  const middle = '],"revisions":[';
  const tail = '],"duplicate_rows":[]}';
  // Each id quoted, each revision one digit; a comma between elements.
  const idsBytes = rows === 0 ? 0 : rows * (idLength + 3) - 1;
  const revisionsBytes = rows === 0 ? 0 : rows * 2 - 1;
  const body = Buffer.allocUnsafe(head.length + idsBytes + middle.length + revisionsBytes + tail.length);
  let at = body.write(head, 0, 'latin1');
  for (let row = 0; row < rows; row++) {
    if (row > 0) body[at++] = comma;
    body[at++] = quote;
    admitted.idInto(row, body, at);
    at += idLength;
    body[at++] = quote;
  }
  at += body.write(middle, at, 'latin1');
  for (let row = 0; row < rows; row++) {
    if (row > 0) body[at++] = comma;
    body[at++] = one;
  }
  at += body.write(tail, at, 'latin1');
  return body;
}
