// The protocol-buffers wire format, as far as the Flight messages need it: varints, 64-bit
// integers as varints, length-delimited bytes/strings/messages, and skipping fields it does
// not know (a newer client may send them). Written by hand rather than taking a protobuf
// library because Flight's hot message (FlightData) has four fields and its body must stay a
// view of the received buffer, never a copy; every other message is a few fields more.
// protobufjs's Reader also returns views, but made to refuse what this one refuses it was
// slower: docs/decisions/0011-flight-protobuf-reader.md has the figures.
//
//   field = tag(varint: number << 3 | wire type) value
//   wire type 0 varint · 1 fixed64 · 2 length-delimited (varint length, bytes) · 5 fixed32
//
// A reader's failure is a WireError naming the field; callers turn it into a Flight error.
// Owned by the main thread (the gRPC server's event loop).

export const wireTypes = { varint: 0, fixed64: 1, lengthDelimited: 2, fixed32: 5 } as const;

/** Malformed protobuf bytes: the message names where. */
export class WireError extends Error {
  override readonly name = 'WireError';
}

/** Reads one message's fields in order; bytes fields are views of the input. */
export class ProtoReader {
  readonly #bytes: Buffer;
  #pos = 0;

  constructor(bytes: Buffer) {
    this.#bytes = bytes;
  }

  get done(): boolean {
    return this.#pos >= this.#bytes.length;
  }

  /** The next field's number and wire type. */
  tag(): { field: number; wireType: number } {
    const tag = this.varint();
    const field = Math.floor(tag / 8);
    if (field === 0) throw new WireError(`field number 0 at byte ${this.#pos}`);
    return { field, wireType: tag % 8 };
  }

  /** A varint as a Number; values past 2^53 are refused (no Flight field needs them). */
  varint(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      const byte = this.#bytes[this.#pos++];
      if (byte === undefined) throw new WireError('a varint runs past the end of the message');
      value += (byte & 0x7f) * scale;
      if ((byte & 0x80) === 0) {
        if (!Number.isSafeInteger(value)) throw new WireError(`a varint of ${value} is past 2^53`);
        return value;
      }
      scale *= 128;
    }
    throw new WireError('a varint longer than 10 bytes');
  }

  /** A length-delimited value as a view (no copy). */
  bytes(): Buffer {
    const length = this.varint();
    const end = this.#pos + length;
    if (end > this.#bytes.length) throw new WireError(`a field of ${length} bytes runs past the end of the message`);
    const view = this.#bytes.subarray(this.#pos, end);
    this.#pos = end;
    return view;
  }

  string(): string {
    return this.bytes().toString('utf8');
  }

  /** Skips a field of a number this reader does not know. */
  skip(wireType: number): void {
    switch (wireType) {
      case wireTypes.varint:
        this.varint();
        return;
      case wireTypes.fixed64:
        this.#advance(8);
        return;
      case wireTypes.lengthDelimited:
        this.bytes();
        return;
      case wireTypes.fixed32:
        this.#advance(4);
        return;
      default:
        throw new WireError(`wire type ${wireType} is not one protobuf 3 uses`);
    }
  }

  /** Checks that a known field came with the wire type its declaration gives. */
  expect(field: number, wireType: number, wanted: number): void {
    if (wireType !== wanted) throw new WireError(`field ${field} has wire type ${wireType}, not ${wanted}`);
  }

  #advance(count: number): void {
    if (this.#pos + count > this.#bytes.length) throw new WireError('a fixed-width field runs past the end of the message');
    this.#pos += count;
  }
}

/** Builds one message; `finish()` joins the parts (large bytes fields are not copied until then). */
export class ProtoWriter {
  readonly #parts: Buffer[] = [];
  #scratch: number[] = [];
  #length = 0;

  varintField(field: number, value: number): this {
    if (value === 0) return this; // proto3: a zero scalar is not written
    this.#pushVarint(field * 8 + wireTypes.varint);
    if (value < 0) this.#pushNegative(value);
    else this.#pushVarint(value);
    return this;
  }

  boolField(field: number, value: boolean): this {
    return this.varintField(field, value ? 1 : 0);
  }

  bytesField(field: number, value: Uint8Array): this {
    if (value.length === 0) return this;
    return this.#lengthDelimited(field, value);
  }

  stringField(field: number, value: string): this {
    if (value === '') return this;
    return this.#lengthDelimited(field, Buffer.from(value, 'utf8'));
  }

  /** A repeated string field: every element is written, empty ones too. */
  repeatedStringField(field: number, values: readonly string[]): this {
    for (const value of values) this.#lengthDelimited(field, Buffer.from(value, 'utf8'));
    return this;
  }

  /** An embedded message, written even when empty (presence matters for messages). */
  messageField(field: number, message: Buffer): this {
    return this.#lengthDelimited(field, message);
  }

  finish(): Buffer {
    this.#flushScratch();
    return Buffer.concat(this.#parts, this.#length);
  }

  #lengthDelimited(field: number, value: Uint8Array): this {
    this.#pushVarint(field * 8 + wireTypes.lengthDelimited);
    this.#pushVarint(value.length);
    this.#flushScratch();
    this.#parts.push(Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength));
    this.#length += value.length;
    return this;
  }

  #pushVarint(value: number): void {
    let rest = value;
    while (rest >= 0x80) {
      this.#scratch.push((rest % 0x80) | 0x80);
      rest = Math.floor(rest / 0x80);
    }
    this.#scratch.push(rest);
  }

  /** A negative int64 (only -1, "unknown", is ever sent): ten bytes of two's complement. */
  #pushNegative(value: number): void {
    let rest = BigInt.asUintN(64, BigInt(value));
    for (let i = 0; i < 9; i++) {
      this.#scratch.push(Number(rest & 0x7fn) | 0x80);
      rest >>= 7n;
    }
    this.#scratch.push(Number(rest));
  }

  #flushScratch(): void {
    if (this.#scratch.length === 0) return;
    this.#parts.push(Buffer.from(this.#scratch));
    this.#length += this.#scratch.length;
    this.#scratch = [];
  }
}
