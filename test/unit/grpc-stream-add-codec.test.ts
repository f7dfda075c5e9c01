// StreamAddCodec codes StreamAddTimers's messages once each way (decision 0030): what it reads
// from a request is what proto-loader's deserializer gives the other methods (the same timer
// spec, or the same refusal), and what it writes reads back through proto-loader's decoder as
// the answer proto-loader's serializer writes from the enum's name.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { timersPackage } from '../../ingest/grpc/proto-files.ts';
import { StreamAddCodec, type StreamAddAnswer } from '../../ingest/grpc/stream-add-codec.ts';
import { rpcStatusOf } from '../../ingest/grpc/status-map.ts';
import { timersServiceName } from '../../ingest/grpc/timers-service.ts';
import { type NewTimer, specOf, type TimerStateEnum } from '../../ingest/grpc/timer-messages.ts';
import { errorCodes, FermataError } from '../../engine/errors.ts';

const codec = new StreamAddCodec();
const loader = (timersPackage()[timersServiceName] as unknown as Record<'StreamAddTimers', { requestSerialize(value: unknown): Buffer; requestDeserialize(bytes: Buffer): { timer: NewTimer | null }; responseSerialize(value: unknown): Buffer; responseDeserialize(bytes: Buffer): unknown }>).StreamAddTimers;
const nowMs = 1_796_000_000_123;

const requests: Record<string, unknown> = {
  'a delay, every field': { timer: { delay: { seconds: 60, nanos: 500_000 }, target: 'https://a.example/hook', payload: Buffer.from([0, 255, 7]), headers: { 'x-a': '1', 'x-b': '2' }, key: 'k1', queue: 'billing', callback: 'https://a.example/cb', failure_callback: 'https://a.example/fail' } },
  'a fire_at with nanos': { timer: { fire_at: { seconds: 1_800_000_000, nanos: 1 }, target: 'https://a.example/hook' } },
  'a fire_at before 1970': { timer: { fire_at: { seconds: -5, nanos: 0 }, target: 'https://a.example/hook' } },
  'a fire_at past the safe integers': { timer: { fire_at: { seconds: '9223372036854775807', nanos: 0 }, target: 'https://a.example/hook' } },
  'a negative delay': { timer: { delay: { seconds: -1, nanos: 0 }, target: 'https://a.example/hook' } },
  'nanos out of range': { timer: { delay: { seconds: 1, nanos: 1_000_000_000 }, target: 'https://a.example/hook' } },
  'no fire time': { timer: { target: 'https://a.example/hook', key: 'k2' } },
  'an empty timer': { timer: {} },
  'no timer': {},
};

/** specOf's spec, or the refusal it throws (its code, message and details). */
function outcome(timer: NewTimer | null): unknown {
  try {
    return { spec: specOf(timer, nowMs), when: timer?.when };
  } catch (err) {
    assert.ok(err instanceof FermataError);
    return { code: err.code, message: err.message, details: err.details };
  }
}

for (const [name, request] of Object.entries(requests)) {
  test(`a request with ${name} reads as proto-loader reads it`, () => {
    const bytes = loader.requestSerialize(request);
    assert.deepEqual(outcome(codec.decode(bytes)), outcome(loader.requestDeserialize(bytes).timer));
  });
}

const states: TimerStateEnum[] = ['TIMER_STATE_UNSPECIFIED', 'TIMER_STATE_PENDING', 'TIMER_STATE_RETRYING', 'TIMER_STATE_DELIVERING', 'TIMER_STATE_DELIVERED', 'TIMER_STATE_DEAD', 'TIMER_STATE_CANCELLED'];

test('an added answer, in each state, reads back as proto-loader writes it from the enum name', () => {
  for (const state of states) {
    const added = { id: '01JF0000000000000000000000', fire_at: { seconds: 1_800_000_000, nanos: 123_000_000 }, revision: 3, duplicate: state !== 'TIMER_STATE_UNSPECIFIED', differs: state === 'TIMER_STATE_DEAD' ? ['target', 'payload'] : [] };
    const encoded = codec.encode({ added: { ...added, state: codec.stateNumberOf(state) } });
    assert.deepEqual(loader.responseDeserialize(encoded), loader.responseDeserialize(loader.responseSerialize({ added: { ...added, state } })), state);
  }
});

test('an error answer reads back with its google.rpc details', () => {
  const answer: StreamAddAnswer = { error: (({ unexpected: _, ...status }) => status)(rpcStatusOf(new FermataError(errorCodes.batchInvalid, 'target must be an http(s) URL', { field: 'target' }))) };
  const read = loader.responseDeserialize(codec.encode(answer)) as { result: string; error: { code: number; message: string; details: Array<{ type_url: string }> } };
  assert.deepEqual(read, loader.responseDeserialize(loader.responseSerialize(answer)));
  assert.equal(read.result, 'error');
  assert.equal(read.error.code, 3);
  assert.ok(read.error.details.some((detail) => detail.type_url.endsWith('google.rpc.BadRequest')));
});
