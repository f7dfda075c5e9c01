// One transaction's records as PostgreSQL's binary COPY stream into fermata_log (partition,
// seq, type, epoch, body): the bodies go as they are, never hex-encoded as a bytea parameter
// would be ([decision 0016](../../docs/decisions/0016-pg-log-copy.md)). Runs on the thread that
// owns the PgLog (the main thread).
//
//   stream = signature(11) flags(i32 0) extension(i32 0) { row } trailer(i16 -1)
//   row    = fields(i16 5) len(i32 4) partition(i32) len(i32 8) seq(i64) len(i32 2) type(i16)
//            len(i32 8) epoch(i64) len(i32 N) body(N bytes)
// Every integer big-endian (PostgreSQL's COPY BINARY format).

/** "PGCOPY\n\377\r\n\0" */
const signature = [0x50, 0x47, 0x43, 0x4f, 0x50, 0x59, 0x0a, 0xff, 0x0d, 0x0a, 0x00];
const headerBytes = signature.length + 8;
const rowHeaderBytes = 2 + (4 + 4) + (4 + 8) + (4 + 2) + (4 + 8) + 4;

export interface CopyRow {
  readonly type: number;
  /** The body is these parts, concatenated. */
  readonly parts: readonly Uint8Array[];
  readonly bodyBytes: number;
}

/** Bodies below this size are copied in with the row headers (one CopyData message for many small records); larger ones are chunks of their own. */
const copyBodyBytesMax = 64 * 1024;

/**
 * The COPY stream of `rows` at sequences baseSeq, baseSeq + 1, …, as chunks to write in order:
 * headers and small bodies in one buffer, each part of a large body a chunk of its own.
 */
export function encodeCopyRows(partition: number, epoch: number, baseSeq: number, rows: readonly CopyRow[]): Uint8Array[] {
  let copiedBytes = headerBytes + rows.length * rowHeaderBytes + 2;
  for (const row of rows) if (row.bodyBytes < copyBodyBytesMax) copiedBytes += row.bodyBytes;
  const buffer = Buffer.allocUnsafe(copiedBytes);
  buffer.set(signature, 0);
  buffer.writeInt32BE(0, signature.length);
  buffer.writeInt32BE(0, signature.length + 4);
  const chunks: Uint8Array[] = [];
  let start = 0;
  let at = headerBytes;
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i] as CopyRow;
    at = buffer.writeInt16BE(5, at);
    at = buffer.writeInt32BE(4, at);
    at = buffer.writeInt32BE(partition, at);
    at = buffer.writeInt32BE(8, at);
    at = buffer.writeBigInt64BE(BigInt(baseSeq + i), at);
    at = buffer.writeInt32BE(2, at);
    at = buffer.writeInt16BE(row.type, at);
    at = buffer.writeInt32BE(8, at);
    at = buffer.writeBigInt64BE(BigInt(epoch), at);
    at = buffer.writeInt32BE(row.bodyBytes, at);
    if (row.bodyBytes < copyBodyBytesMax) {
      for (const part of row.parts) {
        buffer.set(part, at);
        at += part.length;
      }
    } else {
      chunks.push(buffer.subarray(start, at), ...row.parts);
      start = at;
    }
  }
  at = buffer.writeInt16BE(-1, at);
  chunks.push(buffer.subarray(start, at));
  return chunks;
}
