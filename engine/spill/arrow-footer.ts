// Reads the two things verifyRun needs from an Arrow IPC file footer (Arrow's File.fbs and
// Schema.fbs flatbuffers): the schema's custom metadata and the record batch blocks. Written
// here rather than through apache-arrow's footer decoder because that one trusts the bytes: a
// damaged vector length makes it loop billions of times. Every offset and length is checked
// against the buffer before use, so hostile bytes end in a FooterError, never a hang.
//
//   Footer  { version: short, schema: Schema, dictionaries: [Block], recordBatches: [Block] }
//   Schema  { endianness: short, fields: [Field], custom_metadata: [KeyValue] }
//   KeyValue { key: string, value: string }
//   Block   struct { offset: long, metaDataLength: int, (pad 4), bodyLength: long }  ; 24 bytes

export interface FooterBlock {
  readonly offset: number;
  readonly metaDataLength: number;
  readonly bodyLength: number;
}

export interface FooterSummary {
  readonly metadata: ReadonlyMap<string, string>;
  readonly recordBatches: readonly FooterBlock[];
  readonly dictionaryCount: number;
}

export class FooterError extends Error {}

const blockBytes = 24;
const footerFields = { schema: 1, dictionaries: 2, recordBatches: 3 } as const;
const schemaFields = { customMetadata: 2 } as const;
const keyValueFields = { key: 0, value: 1 } as const;
const decoder = new TextDecoder('utf-8', { fatal: true });

class Reader {
  readonly #view: DataView;
  readonly #bytes: Uint8Array;

  constructor(bytes: Uint8Array) {
    this.#bytes = bytes;
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  #need(at: number, length: number, what: string): void {
    if (!Number.isSafeInteger(at) || at < 0 || length < 0 || at + length > this.#bytes.length) {
      throw new FooterError(`${what} at ${at} (+${length}) is outside the footer's ${this.#bytes.length} bytes`);
    }
  }

  u32(at: number, what: string): number {
    this.#need(at, 4, what);
    return this.#view.getUint32(at, true);
  }

  i32(at: number, what: string): number {
    this.#need(at, 4, what);
    return this.#view.getInt32(at, true);
  }

  u16(at: number, what: string): number {
    this.#need(at, 2, what);
    return this.#view.getUint16(at, true);
  }

  i64(at: number, what: string): number {
    this.#need(at, 8, what);
    const value = this.#view.getBigInt64(at, true);
    if (value < 0n || value > BigInt(Number.MAX_SAFE_INTEGER)) throw new FooterError(`${what} ${value} is out of range`);
    return Number(value);
  }

  /** The position of table field `index`, or undefined when the field is absent. */
  field(table: number, index: number, what: string): number | undefined {
    const vtable = table - this.i32(table, `${what} vtable offset`);
    const vtableBytes = this.u16(vtable, `${what} vtable size`);
    const slot = 4 + 2 * index;
    if (slot + 2 > vtableBytes) return undefined;
    const offset = this.u16(vtable + slot, `${what} field ${index}`);
    return offset === 0 ? undefined : table + offset;
  }

  /** Follows the u32 offset stored at `at`. */
  deref(at: number, what: string): number {
    return at + this.u32(at, what);
  }

  /** A vector at `at`: its element count (bounded by the bytes it needs) and first element. */
  vector(at: number, elementBytes: number, what: string): { count: number; start: number } {
    const count = this.u32(at, `${what} length`);
    this.#need(at + 4, count * elementBytes, what);
    return { count, start: at + 4 };
  }

  string(at: number, what: string): string {
    const { count, start } = this.vector(at, 1, what);
    try {
      return decoder.decode(this.#bytes.subarray(start, start + count));
    } catch {
      throw new FooterError(`${what} is not UTF-8`);
    }
  }
}

export function readFooter(bytes: Uint8Array): FooterSummary {
  const r = new Reader(bytes);
  const footer = r.deref(0, 'root offset');
  const metadata = new Map<string, string>();
  const schemaAt = r.field(footer, footerFields.schema, 'footer');
  if (schemaAt === undefined) throw new FooterError('the footer has no schema');
  const schema = r.deref(schemaAt, 'schema offset');
  const metadataAt = r.field(schema, schemaFields.customMetadata, 'schema');
  if (metadataAt !== undefined) {
    const list = r.vector(r.deref(metadataAt, 'custom metadata offset'), 4, 'custom metadata');
    for (let i = 0; i < list.count; i++) {
      const entry = r.deref(list.start + 4 * i, 'key-value offset');
      const keyAt = r.field(entry, keyValueFields.key, 'key-value');
      const valueAt = r.field(entry, keyValueFields.value, 'key-value');
      if (keyAt === undefined || valueAt === undefined) throw new FooterError('a metadata entry lacks its key or value');
      metadata.set(r.string(r.deref(keyAt, 'key offset'), 'metadata key'), r.string(r.deref(valueAt, 'value offset'), 'metadata value'));
    }
  }
  const blocks = (field: number, what: string): FooterBlock[] => {
    const at = r.field(footer, field, 'footer');
    if (at === undefined) return [];
    const list = r.vector(r.deref(at, `${what} offset`), blockBytes, what);
    const out: FooterBlock[] = [];
    for (let i = 0; i < list.count; i++) {
      const block = list.start + blockBytes * i;
      out.push({ offset: r.i64(block, `${what} offset`), metaDataLength: r.i32(block + 8, `${what} metadata length`), bodyLength: r.i64(block + 16, `${what} body length`) });
    }
    return out;
  };
  const dictionaries = blocks(footerFields.dictionaries, 'dictionary blocks');
  return { metadata, recordBatches: blocks(footerFields.recordBatches, 'record batch blocks'), dictionaryCount: dictionaries.length };
}
