// Hostile JSON and NDJSON bodies for POST /v1/timers, mutated from valid timers (fast-check, so a
// failure shrinks to a small body and replays from its seed). A timer is held as its fields'
// raw JSON texts, so a mutation can put in what JSON.stringify never writes: numbers past
// double range, 100,000-deep nesting, a key twice, "__proto__", invalid UTF-8, a cut body.
//
//   valid timer ─► 1–3 field mutations (wrong type, huge number, deep nesting, unicode,
//                  missing field, extra field, duplicate field) ─► text ─► maybe byte mutations
//
// Valid timers fire an hour or more ahead, at `target`, so accepted ones are never delivered
// during a run.
import fc from 'fast-check';

export interface FuzzBody {
  readonly contentType: string | undefined;
  readonly body: Buffer;
}

/** A timer as [field name, raw JSON text of its value] pairs, in body order. */
type RawFields = Array<[string, string]>;

const timerFields = ['fire_at', 'delay_ms', 'target', 'payload', 'payload_base64', 'headers', 'key', 'queue'] as const;
const hourMs = 3_600_000;

/** Field names a mutation may aim at: the known ones, and a few that objects inherit. */
const fieldName = fc.constantFrom(...timerFields, '__proto__', 'constructor', 'toString', 'hasOwnProperty');

const rawNumbers = [
  '1e999', '-1e999', '1e308', '-1e308', '9007199254740993', '-9007199254740993', '8640000000000001', '-8640000000000001',
  '123456789012345678901234567890', '0.5', '-0', '1e-400', '4294967296', '2147483648', '-1', '5e-324', '0', '1E3', '00', '01',
];

const hugeNumberText = fc.oneof(
  fc.constantFrom(...rawNumbers),
  fc.bigInt({ min: -(2n ** 256n), max: 2n ** 256n }).map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((value) => JSON.stringify(value)),
);

const wrongTypeText = fc.oneof(
  fc.constantFrom('null', 'true', 'false', '[]', '{}', '""', '"0"', '[null]', '{"":""}'),
  fc.integer().map(String),
  fc.string({ maxLength: 40 }).map((text) => JSON.stringify(text)),
  fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)),
);

const deepText = fc
  .record({ depth: fc.oneof(fc.integer({ min: 1, max: 64 }), fc.integer({ min: 1_000, max: 100_000 })), object: fc.boolean() })
  .map(({ depth, object }) => (object ? '{"a":'.repeat(depth) + '1' + '}'.repeat(depth) : '['.repeat(depth) + ']'.repeat(depth)));

/** Strings JSON.stringify writes (any code unit, lone surrogates escaped), and escapes it never writes. */
const unicodeText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 64 }).map((text) => JSON.stringify(text)),
  fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((unit) => String.fromCharCode(unit)), maxLength: 16 }).map((text) => JSON.stringify(text)),
  fc.constantFrom('"\\ud800"', '"\\udfff\\ud800"', '"\\u0000"', '"\\uZZZZ"', '"\\x41"', '"\u2028\u2029"', '"\\/\\b\\f"', '"http://\\u0000@127.0.0.1/"'),
  fc.webUrl({ withQueryParameters: true, withFragments: true }).map((url) => JSON.stringify(url)),
);

type FieldMutation =
  | { readonly kind: 'set'; readonly field: string; readonly text: string }
  | { readonly kind: 'remove'; readonly field: string }
  | { readonly kind: 'add'; readonly field: string; readonly text: string };

const fieldMutation: fc.Arbitrary<FieldMutation> = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), field: fieldName, text: fc.oneof(wrongTypeText, hugeNumberText, deepText, unicodeText) }),
  fc.record({ kind: fc.constant('remove' as const), field: fieldName }),
  fc.record({
    kind: fc.constant('add' as const),
    field: fc.oneof(fieldName, fc.string({ maxLength: 12 }), fc.string({ unit: 'binary', maxLength: 8 })),
    text: fc.oneof(wrongTypeText, unicodeText),
  }),
);

function mutateFields(fields: RawFields, mutation: FieldMutation): RawFields {
  switch (mutation.kind) {
    case 'set': {
      const at = fields.findIndex(([name]) => name === mutation.field);
      if (at < 0) return [...fields, [mutation.field, mutation.text]];
      return fields.map((entry, i): [string, string] => (i === at ? [mutation.field, mutation.text] : entry));
    }
    case 'remove':
      return fields.filter(([name]) => name !== mutation.field);
    case 'add':
      // Added even when the name is there already: a key twice in one object.
      return [...fields, [mutation.field, mutation.text]];
  }
}

const objectText = (fields: RawFields): string => `{${fields.map(([name, text]) => `${JSON.stringify(name)}:${text}`).join(',')}}`;

/** A valid timer for `target`, as raw fields. */
export function validTimerFields(target: string): fc.Arbitrary<RawFields> {
  const when = fc.oneof(
    fc.integer({ min: hourMs, max: 30 * 24 * hourMs }).map((ms): [string, string] => ['delay_ms', String(ms)]),
    fc.date({ min: new Date('2031-01-01T00:00:00Z'), max: new Date('2035-12-31T00:00:00Z'), noInvalidDate: true }).map((date): [string, string] => ['fire_at', JSON.stringify(date.toISOString())]),
    fc.integer({ min: 1_950_000_000_000, max: 2_050_000_000_000 }).map((ms): [string, string] => ['fire_at', String(ms)]),
  );
  const optional = fc.record(
    {
      payload: fc.string({ maxLength: 64 }).map((text): [string, string] => ['payload', JSON.stringify(text)]),
      headers: fc.dictionary(fc.stringMatching(/^x-[a-z]{1,8}$/), fc.string({ maxLength: 16 }), { maxKeys: 3 }).map((headers): [string, string] => ['headers', JSON.stringify(headers)]),
      key: fc.string({ minLength: 1, maxLength: 32 }).map((key): [string, string] => ['key', JSON.stringify(key)]),
      queue: fc.constantFrom('default', 'fuzz').map((queue): [string, string] => ['queue', JSON.stringify(queue)]),
    },
    { requiredKeys: [] },
  );
  const path = fc.stringMatching(/^\/[a-z0-9]{0,12}$/);
  return fc.tuple(when, path, optional).map(([fire, at, rest]): RawFields => [fire, ['target', JSON.stringify(`${target}${at}`)], ...Object.values(rest)]);
}

/** One timer's text: a valid timer with 0–3 field mutations (0 keeps a share of the bodies valid). */
function timerText(target: string): fc.Arbitrary<string> {
  return fc
    .tuple(validTimerFields(target), fc.array(fieldMutation, { minLength: 0, maxLength: 3 }))
    .map(([fields, mutations]) => objectText(mutations.reduce(mutateFields, fields)));
}

type TextMutation =
  | { readonly kind: 'truncate'; readonly at: number }
  | { readonly kind: 'insert'; readonly at: number; readonly bytes: Uint8Array }
  | { readonly kind: 'flip'; readonly at: number; readonly bit: number };

const textMutation: fc.Arbitrary<TextMutation> = fc.oneof(
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), bytes: fc.oneof(fc.uint8Array({ minLength: 1, maxLength: 8 }), fc.constantFrom(Uint8Array.of(0xff), Uint8Array.of(0xc0, 0x80), Uint8Array.of(0xed, 0xa0, 0x80), Uint8Array.of(0))) }),
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
);

function mutateText(bytes: Buffer, mutation: TextMutation): Buffer {
  const at = bytes.length === 0 ? 0 : mutation.at % (bytes.length + 1);
  switch (mutation.kind) {
    case 'truncate':
      return bytes.subarray(0, at);
    case 'insert':
      return Buffer.concat([bytes.subarray(0, at), mutation.bytes, bytes.subarray(at)]);
    case 'flip': {
      if (bytes.length === 0) return bytes;
      const copy = Buffer.from(bytes);
      const index = at % copy.length;
      copy[index] = (copy[index] as number) ^ (1 << mutation.bit);
      return copy;
    }
  }
}

const jsonContentTypes = fc.oneof(
  { weight: 12, arbitrary: fc.constant('application/json') },
  { weight: 1, arbitrary: fc.constantFrom('application/json; charset=utf-8', 'APPLICATION/JSON', 'application/json;charset=latin1', 'application/json, text/plain', 'text/plain', 'application/x-www-form-urlencoded', '', undefined) },
);

/**
 * A hostile body for POST /v1/timers: mostly one JSON timer, some NDJSON batches of them, some
 * a whole different JSON value; a share gets byte mutations of its text as well.
 */
export function jsonFuzzBody(target: string): fc.Arbitrary<FuzzBody> {
  const single = fc.record({ contentType: jsonContentTypes, text: fc.oneof({ weight: 9, arbitrary: timerText(target) }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((value) => JSON.stringify(value) ?? '') }) });
  const ndjson = fc.record({
    contentType: fc.constantFrom('application/x-ndjson', 'application/x-ndjson; charset=utf-8'),
    text: fc.array(timerText(target), { minLength: 1, maxLength: 6 }).chain((lines) => fc.constantFrom('\n', '\r\n', '\n\n').map((separator) => lines.join(separator))),
  });
  return fc
    .tuple(fc.oneof({ weight: 4, arbitrary: single }, { weight: 1, arbitrary: ndjson }), fc.array(textMutation, { maxLength: 2 }))
    .map(([{ contentType, text }, mutations]) => ({ contentType, body: mutations.reduce(mutateText, Buffer.from(text, 'utf8')) }));
}

/**
 * A hostile body for POST /v1/timers/stream: 1–20 lines, each a timer with 0–3 field
 * mutations, separated by \n, \r\n or a blank line, then maybe byte mutations of the whole
 * (which may cut a line, join two, or put bytes that are not UTF-8 into one).
 */
export function streamFuzzBody(target: string): fc.Arbitrary<Buffer> {
  return fc
    .tuple(
      fc.array(timerText(target), { minLength: 1, maxLength: 20 }),
      fc.constantFrom('\n', '\r\n', '\n\n', '\n \n'),
      fc.boolean(),
      fc.array(textMutation, { maxLength: 2 }),
    )
    .map(([lines, separator, lastNewline, mutations]) => mutations.reduce(mutateText, Buffer.from(lines.join(separator) + (lastNewline ? '\n' : ''), 'utf8')));
}
