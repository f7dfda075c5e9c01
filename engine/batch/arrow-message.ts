// The few fields of an Arrow IPC Message flatbuffer that must be checked before apache-arrow
// reads a stream: Message.header_type, .header, .bodyLength; DictionaryBatch.id, .isDelta;
// RecordBatch.length, .nodes, .buffers, .variadicBufferCounts; every custom_metadata and schema
// vector. They are located through the flatbuffer vtables with
// bounds checks, so forged bytes give a BATCH_INVALID error, never a crash. Arrow's reader trusts
// the counts it finds there: a forged row or node count made it allocate without bound (the
// Flight mutation test found it; the same bytes came in over HTTP). Shared by the HTTP and
// Flight paths (engine/batch/arrow-codec.ts, ingest/flight/ipc-assembler.ts). Any thread.
import type { FermataError } from '../errors.ts';
import { timerLimits } from '../limits.ts';

/** MessageHeader union tags of Arrow's Message.fbs. */
export const headerTypes = { schema: 1, dictionaryBatch: 2, recordBatch: 3 } as const;

export interface MessageFacts {
  readonly headerType: number;
  readonly bodyLength: number;
  /** RecordBatch and DictionaryBatch: the batch's row count (a dictionary's entries). */
  readonly rows: number;
  /** DictionaryBatch only. */
  readonly dictionaryId: bigint;
  readonly isDelta: boolean;
}

// Every field is found and every offset and length read as the flatbuffers runtime apache-arrow
// uses does (vtable entries as int16, offsets and lengths as int32, all signed; a field present
// when its slot starts inside the vtable): a vtable of odd size (one flipped bit) made this check
// skip a vector that apache-arrow then walked for 14,942,208 entries (B12).

/** The position of table field `index`, or undefined when the vtable leaves it out (its default). */
function fieldPosition(buf: Buffer, table: number, index: number): number | undefined {
  const vtable = table - buf.readInt32LE(table);
  const vtableBytes = buf.readInt16LE(vtable);
  const slot = 4 + 2 * index;
  // As flatbuffers' __offset: present when the slot starts inside the vtable, even if it ends past an odd size.
  if (slot >= vtableBytes) return undefined;
  const offset = buf.readInt16LE(vtable + slot);
  return offset === 0 ? undefined : table + offset;
}

function tableAt(buf: Buffer, position: number): number {
  const table = position + buf.readInt32LE(position);
  if (table < 0 || table >= buf.length) throw new RangeError('a table offset points outside the buffer');
  return table;
}

/** Where the vector at `position` starts (its length word) and its length; RangeError when either lies outside the buffer. */
function vectorAt(buf: Buffer, position: number): { readonly start: number; readonly count: number } {
  const start = position + buf.readInt32LE(position);
  return { start, count: buf.readInt32LE(start) };
}

function int64At(buf: Buffer, position: number | undefined): bigint {
  return position === undefined ? 0n : buf.readBigInt64LE(position);
}

/** Bytes of one element of RecordBatch's struct vectors: FieldNode {length, null_count}, Buffer {offset, length}. */
const structBytes = 16;

/**
 * Checks what the Arrow reader would otherwise trust: the row count against the batch limit,
 * that the nodes and buffers vectors lie inside the flatbuffer, each node's length and null
 * count within the limit (fermata's columns are flat: a node is no longer than the batch limit),
 * and each buffer inside the body.
 */
function checkRecordBatch(header: Buffer, recordBatch: number, bodyLength: bigint, malformed: (what: string) => FermataError): bigint {
  const limit = BigInt(timerLimits.rowsPerBatchMax);
  const rows = int64At(header, fieldPosition(header, recordBatch, 0));
  if (rows < 0n || rows > limit) throw malformed(`a record batch of ${rows} rows (at most ${timerLimits.rowsPerBatchMax})`);
  for (const [index, name] of [[1, 'nodes'], [2, 'buffers']] as const) {
    const position = fieldPosition(header, recordBatch, index);
    if (position === undefined) continue;
    const { start: vector, count } = vectorAt(header, position);
    if (count < 0 || vector + 4 + count * structBytes > header.length) throw malformed(`the record batch's ${name} vector claims ${count} entries, more than its header holds`);
    for (let i = 0; i < count; i++) {
      const first = header.readBigInt64LE(vector + 4 + i * structBytes);
      const second = header.readBigInt64LE(vector + 4 + i * structBytes + 8);
      if (index === 1 && (first < 0n || first > limit || second < 0n || second > first)) throw malformed(`column node ${i} claims ${first} values (${second} null); at most ${timerLimits.rowsPerBatchMax}`);
      if (index === 2 && (first < 0n || second < 0n || first + second > bodyLength)) throw malformed(`buffer ${i} of the record batch (offset ${first}, ${second} bytes) lies outside its ${bodyLength}-byte body`);
    }
  }
  // variadicBufferCounts (4, int64 each): apache-arrow walks its claimed length too (B14).
  vectorCount(header, recordBatch, 4, 8, "record batch's variadic buffer counts", malformed);
  return rows;
}

/** Fields of a schema, nested ones included, at most: fermata's columns are few and flat. */
const schemaFieldsMax = 256;
const schemaDepthMax = 8;

/** The element count of vector field `index` of `table` (0 when absent), checked to lie inside the buffer. */
function vectorCount(buf: Buffer, table: number, index: number, elementBytes: number, what: string, malformed: (what: string) => FermataError): number {
  const position = fieldPosition(buf, table, index);
  if (position === undefined) return 0;
  const { start: vector, count } = vectorAt(buf, position);
  if (count < 0 || vector + 4 + count * elementBytes > buf.length) throw malformed(`the ${what} vector claims ${count} entries, more than its header holds`);
  return count;
}

/** The table at element `i` of vector field `index` of `table`. */
function vectorTable(buf: Buffer, table: number, index: number, i: number): number {
  const position = fieldPosition(buf, table, index) as number;
  return tableAt(buf, vectorAt(buf, position).start + 4 + i * 4);
}

/**
 * Checks a Schema's fields (names, children, custom metadata) the way checkRecordBatch checks a
 * batch: apache-arrow walks every vector length it finds, so a forged one kept it busy for minutes.
 */
function checkSchema(header: Buffer, schema: number, malformed: (what: string) => FermataError): void {
  let fields = 0;
  const checkFields = (table: number, vectorIndex: number, depth: number): void => {
    const count = vectorCount(header, table, vectorIndex, 4, 'schema fields', malformed);
    fields += count;
    if (fields > schemaFieldsMax || (count > 0 && depth > schemaDepthMax)) throw malformed(`a schema of more than ${schemaFieldsMax} fields or ${schemaDepthMax} levels`);
    for (let i = 0; i < count; i++) {
      const field = vectorTable(header, table, vectorIndex, i);
      // Field: name (0, a string: bytes), custom_metadata (6: tables); children (5) recursively.
      vectorCount(header, field, 0, 1, 'field name', malformed);
      vectorCount(header, field, 6, 4, 'field metadata', malformed);
      checkFields(field, 5, depth + 1);
    }
  };
  vectorCount(header, schema, 2, 4, 'schema metadata', malformed);
  checkFields(schema, 1, 0);
}

/** Bytes of a Footer Block struct: offset (int64), metaDataLength (int32), padding, bodyLength (int64). */
const blockBytes = 24;

/**
 * Checks an Arrow file's Footer the way messageFacts checks a message: its schema (apache-arrow
 * decodes the footer's, not the stream's), and that each dictionary and record batch block
 * starts at a message frame the caller walked and checked (`frameStarts`); a forged offset would
 * make the file reader decode bytes nothing checked (B13).
 */
export function checkFooter(footer: Buffer, frameStarts: ReadonlySet<number>, malformed: (what: string) => FermataError): void {
  try {
    const table = tableAt(footer, 0);
    const schemaPosition = fieldPosition(footer, table, 1);
    if (schemaPosition === undefined) throw malformed('an Arrow file footer without its schema');
    checkSchema(footer, tableAt(footer, schemaPosition), malformed);
    for (const [index, what] of [[2, 'dictionary'], [3, 'record batch']] as const) {
      const count = vectorCount(footer, table, index, blockBytes, `footer ${what} blocks`, malformed);
      if (count === 0) continue;
      const start = vectorAt(footer, fieldPosition(footer, table, index) as number).start + 4;
      for (let i = 0; i < count; i++) {
        const offset = footer.readBigInt64LE(start + i * blockBytes);
        if (!frameStarts.has(Number(offset))) throw malformed(`the footer's ${what} block ${i} points at byte ${offset}, where no message of the file starts`);
      }
    }
  } catch (err) {
    if (err instanceof RangeError) throw malformed(`not an Arrow file footer flatbuffer (${err.message})`);
    throw err;
  }
}

/** The Message fields checked and read; `malformed` makes the error (a RangeError inside means the flatbuffer lies about its offsets). */
export function messageFacts(header: Buffer, malformed: (what: string) => FermataError): MessageFacts {
  try {
    const message = tableAt(header, 0);
    const typePosition = fieldPosition(header, message, 1);
    const headerType = typePosition === undefined ? 0 : header.readUInt8(typePosition);
    // Anything else (NONE, Tensor, SparseTensor, a forged byte) apache-arrow's stream reader
    // never gets past: a message of header type 0 made it loop forever (B9).
    if (headerType !== headerTypes.schema && headerType !== headerTypes.dictionaryBatch && headerType !== headerTypes.recordBatch) {
      throw malformed(`a message of header type ${headerType} (only Schema, DictionaryBatch and RecordBatch messages are read)`);
    }
    // Message.custom_metadata (4): apache-arrow walks its claimed length before anything else
    // of the message; a forged one kept it busy for minutes (B11).
    vectorCount(header, message, 4, 4, 'message metadata', malformed);
    const bodyLength = int64At(header, fieldPosition(header, message, 3));
    if (bodyLength < 0n || bodyLength > BigInt(Number.MAX_SAFE_INTEGER)) throw malformed(`a message body length of ${bodyLength}`);
    let dictionaryId = 0n;
    let isDelta = false;
    let rows = 0n;
    if (headerType === headerTypes.schema) {
      const headerPosition = fieldPosition(header, message, 2);
      if (headerPosition === undefined) throw malformed('a schema message without its schema');
      checkSchema(header, tableAt(header, headerPosition), malformed);
    }
    if (headerType === headerTypes.recordBatch || headerType === headerTypes.dictionaryBatch) {
      const headerPosition = fieldPosition(header, message, 2);
      if (headerPosition === undefined) throw malformed('a batch message without its header');
      let recordBatch = tableAt(header, headerPosition);
      if (headerType === headerTypes.dictionaryBatch) {
        dictionaryId = int64At(header, fieldPosition(header, recordBatch, 0));
        const deltaPosition = fieldPosition(header, recordBatch, 2);
        isDelta = deltaPosition !== undefined && header.readUInt8(deltaPosition) !== 0;
        const dataPosition = fieldPosition(header, recordBatch, 1);
        if (dataPosition === undefined) throw malformed('a dictionary batch without its record batch');
        recordBatch = tableAt(header, dataPosition);
      }
      rows = checkRecordBatch(header, recordBatch, bodyLength, malformed);
    }
    return { headerType, bodyLength: Number(bodyLength), rows: Number(rows), dictionaryId, isDelta };
  } catch (err) {
    if (err instanceof RangeError) throw malformed(`not an Arrow IPC message flatbuffer (${err.message})`);
    throw err;
  }
}
