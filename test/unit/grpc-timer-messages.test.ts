// ingest/grpc/timer-messages.ts: Timestamps and Durations to and from epoch ms (a part of a ms
// rounds up, as an RFC 3339 fire_at's does), proto3's empty values as "none", and the refusals
// only gRPC can meet, each naming its field as BATCH_INVALID.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FermataError } from '../../engine/errors.ts';
import { filterFields, msOf, type NewTimer, patchOf, secondsOf, specOf, stateNameOf } from '../../ingest/grpc/timer-messages.ts';

const refusedNaming = (field: string) => (err: unknown): boolean => err instanceof FermataError && err.code === 'BATCH_INVALID' && err.details.field === field;

const timer = (fields: Partial<NewTimer>): NewTimer => ({ target: 'https://a.example/', payload: Buffer.alloc(0), headers: {}, key: '', queue: '', callback: '', failure_callback: '', ...fields });

test('Timestamps: ms and back; a part of a ms rounds up; nanos out of range are refused naming the field', () => {
  assert.deepEqual(secondsOf(1_500), { seconds: 1, nanos: 500_000_000 });
  assert.deepEqual(secondsOf(-1), { seconds: -1, nanos: 999_000_000 });
  assert.equal(msOf(secondsOf(1_796_083_200_123), 'fire_at'), 1_796_083_200_123);
  assert.equal(msOf({ seconds: 1, nanos: 1 }, 'fire_at'), 1_001);
  assert.throws(() => msOf({ seconds: 1, nanos: 1_000_000_000 }, 'due_after'), refusedNaming('due_after'));
});

test('a NewTimer: fire_at or delay, empty strings and bytes as none; no fire time or a negative delay refused', () => {
  const spec = specOf(timer({ when: 'fire_at', fire_at: { seconds: 2_000_000_000, nanos: 0 }, key: 'k', payload: Buffer.from('p') }), 0);
  assert.deepEqual(spec, { fireAtMs: 2_000_000_000_000, target: 'https://a.example/', payload: Buffer.from('p'), key: 'k' });
  assert.equal(specOf(timer({ when: 'delay', delay: { seconds: 60, nanos: 0 } }), 1_000).fireAtMs, 61_000);
  assert.throws(() => specOf(timer({}), 0), refusedNaming('fire_at'));
  assert.throws(() => specOf(timer({ when: 'delay', delay: { seconds: -1, nanos: 0 } }), 0), refusedNaming('delay'));
  assert.throws(() => specOf(null, 0), refusedNaming('timer'));
});

test('a RescheduleTimer: only the fields given; "" removes a callback; none at all is refused', () => {
  assert.deepEqual(patchOf({ id: 'x', headers: null, callback: '', target: 'https://b.example/' }, 0), { target: 'https://b.example/', callback: null });
  assert.deepEqual(patchOf({ id: 'x', headers: { headers: {} } }, 0), { headers: {} });
  assert.throws(() => patchOf({ id: 'x', headers: null }, 0), refusedNaming(''));
});

test('a TimerFilter as the HTTP filter fields: empty ones left out, times as epoch ms, the state by name', () => {
  assert.deepEqual(filterFields(null), {});
  assert.deepEqual(filterFields({ queue: 'q', state: 'TIMER_STATE_RETRYING', key_prefix: '', key: '', due_after: { seconds: 1_800_000_000, nanos: 0 }, due_before: null }), { queue: 'q', state: 'retrying', due_after: 1_800_000_000_000 });
  assert.equal(stateNameOf('TIMER_STATE_UNSPECIFIED'), undefined);
});
