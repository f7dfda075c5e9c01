// SCHEDULE (12) and SCHEDULE_MARK (13) bodies (engine/schedules/schedule-records.ts): the
// golden copies of docs/format/engine-records.md's worked examples, both ways; malformed bodies
// decode to undefined (replay turns that into WAL_CORRUPT); occurrence keys and their prefix.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { recordType } from '../../engine/records.ts';
import { isOccurrenceKey, occurrenceKey, parseOccurrenceKey } from '../../engine/schedules/occurrence-key.ts';
import { decodeScheduleChange, decodeScheduleMarks, encodeScheduleChange, encodeScheduleMarks, type ScheduleChange } from '../../engine/schedules/schedule-records.ts';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

/** docs/format/engine-records.md, "SCHEDULE (12)": the put of `report`. */
const goldenPut = bytes(
  '{"op":"put","name":"report","at_ms":1800000000000,"definition":{"cron":"0 9 * * MON-FRI","time_zone":"Europe/Berlin","anchor_ms":1800000000000,"jitter_ms":0,"catch_up":"latest","target":"https://r.example/hook","queue":"default","payload_base64":"aGk="}}',
);
const goldenPause = bytes('{"op":"pause","name":"report","at_ms":1800000060000}');
/** "SCHEDULE_MARK (13)". */
const goldenMarks = bytes('{"marks":[["report",1800003600000]]}');

const put: ScheduleChange = {
  op: 'put',
  name: 'report',
  atMs: 1_800_000_000_000,
  definition: { cron: '0 9 * * MON-FRI', timeZone: 'Europe/Berlin', anchorMs: 1_800_000_000_000, jitterMs: 0, catchUp: 'latest', target: 'https://r.example/hook', queue: 'default', payload: bytes('hi'), headers: '' },
};

test('SCHEDULE and SCHEDULE_MARK: the documented examples are these bytes, both ways', () => {
  assert.equal(recordType.schedule, 12);
  assert.equal(recordType.scheduleMark, 13);
  assert.deepEqual(encodeScheduleChange(put), goldenPut);
  assert.equal(goldenPut.length, 254);
  const decoded = decodeScheduleChange(goldenPut);
  assert.ok(decoded?.op === 'put');
  assert.deepEqual({ ...decoded.definition, payload: [...decoded.definition.payload] }, { ...put.definition, everyMs: undefined, startAtMs: undefined, endAtMs: undefined, payload: [...bytes('hi')] });
  assert.deepEqual(encodeScheduleChange({ op: 'pause', name: 'report', atMs: 1_800_000_060_000 }), goldenPause);
  assert.equal(goldenPause.length, 52);
  assert.deepEqual(decodeScheduleChange(goldenPause), { op: 'pause', name: 'report', atMs: 1_800_000_060_000 });
  assert.deepEqual(encodeScheduleMarks([{ name: 'report', markMs: 1_800_003_600_000 }]), goldenMarks);
  assert.equal(goldenMarks.length, 36);
  assert.deepEqual(decodeScheduleMarks(goldenMarks), [{ name: 'report', markMs: 1_800_003_600_000 }]);
});

test('headers and every_ms round-trip; malformed bodies decode to undefined', () => {
  const every: ScheduleChange = { op: 'put', name: 'h', atMs: 5, definition: { everyMs: 1000, anchorMs: 5, startAtMs: 5, endAtMs: 9000, jitterMs: 10, catchUp: 'none', target: 't', queue: 'q', payload: new Uint8Array([0, 255]), headers: '{"x-a":"1"}' } };
  assert.deepEqual(encodeScheduleChange(decodeScheduleChange(encodeScheduleChange(every)) as ScheduleChange), encodeScheduleChange(every));
  for (const body of [
    'not json',
    '[]',
    '{"op":"put","name":"x","at_ms":1}',
    '{"op":"stop","name":"x","at_ms":1}',
    '{"op":"pause","name":"","at_ms":1}',
    '{"op":"pause","name":"x","at_ms":1.5}',
    '{"op":"pause","name":"x","at_ms":1,"definition":{}}',
    '{"op":"put","name":"x","at_ms":1,"definition":{"anchor_ms":1,"jitter_ms":0,"catch_up":"sometimes","target":"t","queue":"q","payload_base64":""}}',
    '{"op":"put","name":"x","at_ms":1,"definition":{"anchor_ms":1,"jitter_ms":0,"catch_up":"all","target":"t","queue":"q","payload_base64":"","headers":{"a":1}}}',
  ]) {
    assert.equal(decodeScheduleChange(bytes(body)), undefined, body);
  }
  for (const body of ['{"marks":[]}', '{"marks":[["x"]]}', '{"marks":[[1,2]]}', '{"marks":[["x",1.5]]}', '{}']) assert.equal(decodeScheduleMarks(bytes(body)), undefined, body);
});

test('occurrence keys: schedule:{name}:{ms}, their prefix recognised in a key column', () => {
  const key = occurrenceKey('report', 1_800_000_000_000);
  assert.equal(key, 'schedule:report:1800000000000');
  assert.deepEqual(parseOccurrenceKey(key), { name: 'report', occurrenceMs: 1_800_000_000_000 });
  assert.equal(parseOccurrenceKey('schedule:report'), undefined);
  assert.equal(parseOccurrenceKey('other:report:1'), undefined);
  const column = bytes(`xx${key}`);
  assert.equal(isOccurrenceKey(column, 2, column.length), true);
  assert.equal(isOccurrenceKey(column, 0, column.length), false);
  assert.equal(isOccurrenceKey(column, 2, 10), false, 'shorter than the prefix');
});
