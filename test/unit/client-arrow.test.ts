// arrowPieces (@fermata/client, what addMany sends): rows cut at the server's rows-a-batch and
// bytes limits and where rows change from fire_at to delay_ms, in order, each piece an Arrow
// stream the service's own reader (engine/batch/arrow-codec.ts) takes, with absent values null
// (queue null = default, payload null = empty) and base64 payloads as Binary bytes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tableFromIPC } from 'apache-arrow';
import { arrowPieces, FermataError, type TimerInput } from '@fermata/client';
import { batchFromArrow } from '../../engine/batch/arrow-codec.ts';

const target = 'https://a.example/hook';
const roomy = { batch_rows_max: 100_000, batch_body_bytes_max: 64 << 20, batch_logged_bytes_max: 32 << 20 };

test('cuts at the rows limit, the bytes limit and a change of time column, in order', () => {
  const rows: TimerInput[] = Array.from({ length: 10 }, (_, i) => (i < 7 ? { fire_at: 2_000_000_000_000 + i, target } : { delay_ms: i, target }));
  assert.deepEqual([...arrowPieces(rows, { ...roomy, batch_rows_max: 3 })].map((piece) => [piece.start, piece.rows]), [[0, 3], [3, 3], [6, 1], [7, 3]]);

  const big = Array.from({ length: 6 }, (): TimerInput => ({ delay_ms: 1, target, payload: 'x'.repeat(10_000) }));
  const bytesMax = 16 * 1024 + 25_000; // the stream's reserve, and room for two such rows
  const pieces = [...arrowPieces(big, { ...roomy, batch_body_bytes_max: bytesMax })];
  assert.deepEqual(pieces.map((piece) => piece.rows), [2, 2, 2]);
  for (const piece of pieces) assert.ok(piece.body.length <= bytesMax, `a piece of ${piece.body.length} bytes`);
});

test('each piece is an Arrow stream the service reads, nulls where a row gives nothing', () => {
  const rows: TimerInput[] = [
    { fire_at: new Date(2_000_000_000_000), target, key: 'k0', queue: 'billing', headers: { 'x-a': '1' } },
    { fire_at: '2033-05-18T03:33:20.001Z', target, payload_base64: Buffer.from([0xff, 0]).toString('base64'), callback: 'https://a.example/done' },
    { fire_at: 2_000_000_000_002, target, payload: 'text' },
  ];
  const [piece] = [...arrowPieces(rows, roomy)];
  assert.ok(piece !== undefined);
  const table = tableFromIPC(piece.body);
  assert.deepEqual(table.schema.fields.map((field) => `${field.name}:${String(field.type)}`), ['fire_at:Timestamp<MILLISECOND, UTC>', 'target:Utf8', 'payload:Binary', 'headers:Utf8', 'key:Utf8', 'queue:Utf8', 'callback:Utf8']);
  const batch = batchFromArrow(piece.body, 0, 100_000, 'client');
  assert.deepEqual(Array.from(batch.fireAtMs), [2_000_000_000_000, 2_000_000_000_001, 2_000_000_000_002]);
  assert.deepEqual([table.getChild('key')?.get(1), table.getChild('queue')?.get(1), table.getChild('payload')?.get(0)], [null, null, null]);
  assert.deepEqual(Array.from(table.getChild('payload')?.get(1) as Uint8Array), [0xff, 0]);
  assert.equal(Buffer.from(table.getChild('payload')?.get(2) as Uint8Array).toString(), 'text');
});

test('a row with both fire_at and delay_ms, or a time that is not one, is refused naming its row', () => {
  const refused = (rows: TimerInput[], field: string, row: number): void =>
    assert.throws(() => [...arrowPieces(rows, roomy)], (err: unknown) => err instanceof FermataError && err.code === 'BATCH_INVALID' && err.field === field && err.row === row);
  refused([{ delay_ms: 1, target }, { delay_ms: 1, fire_at: 2_000_000_000_000, target }], 'delay_ms', 1);
  refused([{ fire_at: 2_000_000_000_000, target }, { fire_at: 'next tuesday', target }], 'fire_at', 1);
});
