// Chunk rows of fermata_checkpoint_files (partition, name, chunk, body) as PostgreSQL's binary
// COPY stream, for the partition file system's uploads: the bytes go as they are, where a bytea
// parameter goes hex-encoded, twice the size, and is decoded again by the server. Runs on the
// thread that owns the file system (the main thread).
//
//   stream = signature(11) flags(i32 0) extension(i32 0) { row } trailer(i16 -1)
//   row    = fields(i16 4) len(i32 4) partition(i32) len(i32 N) name(N bytes of UTF-8)
//            len(i32 4) chunk(i32) len(i32 M) body(M bytes)
// Every integer big-endian (PostgreSQL's COPY BINARY format).

/** "PGCOPY\n\377\r\n\0", then the flags and the header extension's length, both 0. */
export const copyHead = Uint8Array.from([0x50, 0x47, 0x43, 0x4f, 0x50, 0x59, 0x0a, 0xff, 0x0d, 0x0a, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]);

/** The end of the stream: a field count of -1. */
export const copyTrailer = Uint8Array.from([0xff, 0xff]);

/** What goes before a chunk's body in the stream: its row's fields up to the body's length. */
export function chunkRowHead(partition: number, name: Uint8Array, chunk: number, bodyBytes: number): Buffer {
  const head = Buffer.allocUnsafe(2 + 4 + 4 + 4 + name.length + 4 + 4 + 4);
  let at = head.writeInt16BE(4, 0);
  at = head.writeInt32BE(4, at);
  at = head.writeInt32BE(partition, at);
  at = head.writeInt32BE(name.length, at);
  head.set(name, at);
  at += name.length;
  at = head.writeInt32BE(4, at);
  at = head.writeInt32BE(chunk, at);
  head.writeInt32BE(bodyBytes, at);
  return head;
}
