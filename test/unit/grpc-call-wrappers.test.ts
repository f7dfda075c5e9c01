// call-wrappers.ts, which both fermata.v1.Timers services take their calls through: a unary
// call is authenticated before its answer runs, a write (not a read) is refused unstarted once
// its deadline passed, errors leave as their gRPC status (an unexpected one logged); a streaming
// call is refused through its 'error' event before it starts, and an export's failure ends it
// so; an export writes its pages in order, waits for 'drain' when the call's buffer is full,
// and stops when the client cancels. Calls here are stand-ins holding what the wrappers read.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import { type handleUnaryCall, Metadata, type ServerDuplexStream, type ServerUnaryCall, type ServerWritableStream, status } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import { Access, fullGrant } from '../../ingest/auth/access.ts';
import { CallWrappers, writeTimerPages } from '../../ingest/grpc/call-wrappers.ts';
import type { GrpcFailure } from '../../ingest/grpc/status-map.ts';
import type { TimerMessage } from '../../ingest/grpc/timer-messages.ts';

const token = 'call-wrappers-token';
const logged: unknown[] = [];
const logger = { error: (fields: unknown) => logged.push(fields) } as unknown as Logger;
const calls = new CallWrappers(new Access([fullGrant(token, 0)]), logger);

function metadata(withToken: boolean): Metadata {
  const meta = new Metadata();
  if (withToken) meta.set('authorization', `Bearer ${token}`);
  return meta;
}

/** What a unary call's callback was given. */
function unaryAnswer<Request>(handler: handleUnaryCall<Request, unknown>, request: Request, options: { token?: boolean; deadline?: number } = {}): Promise<{ failure: GrpcFailure | null; response: unknown }> {
  const call = { metadata: metadata(options.token ?? true), request, getPath: () => '/fermata.v1.Timers/GetTimer', getDeadline: () => options.deadline ?? Infinity };
  return new Promise((resolve) => handler(call as unknown as ServerUnaryCall<Request, unknown>, (failure, response) => resolve({ failure: failure as GrpcFailure | null, response })));
}

/** A streaming call: what it wrote, the status it ended with ('error'), whether it ended. */
class StandInStream extends EventEmitter {
  readonly metadata: Metadata;
  readonly request = {};
  readonly written: unknown[] = [];
  cancelled = false;
  ended = false;
  failure: GrpcFailure | undefined;
  /** write() answers false (the buffer is full) for these writes, counted from 0. */
  readonly fullAt: ReadonlySet<number>;

  constructor(withToken: boolean, fullAt: readonly number[] = []) {
    super();
    this.metadata = metadata(withToken);
    this.fullAt = new Set(fullAt);
    this.on('error', (failure: GrpcFailure) => (this.failure = failure));
  }

  getPath(): string {
    return '/fermata.v1.Timers/ExportTimers';
  }

  getDeadline(): number {
    return Infinity;
  }

  write(message: unknown): boolean {
    this.written.push(message);
    return !this.fullAt.has(this.written.length - 1);
  }

  end(): void {
    this.ended = true;
  }
}

const asExport = (call: StandInStream): ServerWritableStream<object, unknown> => call as unknown as ServerWritableStream<object, unknown>;
const timer = (id: string): TimerMessage => ({ id }) as TimerMessage;

test('a unary call: refused unauthenticated before it runs; a write past its deadline refused unstarted, a read answered', async () => {
  let ran = 0;
  const answer = async ({ id }: { id: string }): Promise<unknown> => {
    ran++;
    return { id };
  };
  const read = calls.unary(answer);
  const write = calls.unary(answer, true);
  const anonymous = await unaryAnswer(read, { id: 'a' }, { token: false });
  assert.equal(anonymous.failure?.code, status.UNAUTHENTICATED);
  assert.equal(ran, 0);
  const late = await unaryAnswer(write, { id: 'b' }, { deadline: Date.now() - 1 });
  assert.equal(late.failure?.code, status.DEADLINE_EXCEEDED);
  assert.equal(ran, 0);
  assert.deepEqual(await unaryAnswer(read, { id: 'c' }, { deadline: Date.now() - 1 }), { failure: null, response: { id: 'c' } });
  assert.deepEqual(await unaryAnswer(write, { id: 'd' }), { failure: null, response: { id: 'd' } });
  assert.equal(ran, 2);
});

test('a unary call\'s error leaves as its status, a batch\'s row named by rowsOf; an unexpected one is logged and INTERNAL', async () => {
  const refused = calls.unary<{ rows: string }, unknown>(
    async () => {
      throw new FermataError(errorCodes.batchInvalid, 'target is not a URL', { field: 'target', row: 2 });
    },
    true,
    ({ rows }) => rows,
  );
  const { failure } = await unaryAnswer(refused, { rows: 'timers' });
  assert.equal(failure?.code, status.INVALID_ARGUMENT);
  const details = failure?.metadata.get('grpc-status-details-bin')[0];
  assert.ok(Buffer.isBuffer(details));
  assert.match(details.toString('latin1'), /timers\[2\]\.target/);
  logged.length = 0;
  const broken = calls.unary<object, unknown>(() => {
    throw new TypeError('a bug');
  });
  assert.equal((await unaryAnswer(broken, {})).failure?.code, status.INTERNAL);
  assert.equal(logged.length, 1);
});

test('a streaming call unauthenticated ends with its status before it starts; an export\'s failure ends the call with its status', async () => {
  let started = 0;
  const bidi = calls.bidiStream(() => void started++);
  const anonymous = new StandInStream(false);
  bidi(anonymous as unknown as ServerDuplexStream<unknown, unknown>);
  assert.equal(anonymous.failure?.code, status.UNAUTHENTICATED);
  const exporting = calls.serverStream<object>(async () => {
    started++;
    throw new FermataError(errorCodes.batchInvalid, 'state is not one', { field: 'state' });
  });
  const refused = new StandInStream(false);
  exporting(asExport(refused));
  assert.equal(refused.failure?.code, status.UNAUTHENTICATED);
  assert.equal(started, 0);
  const failing = new StandInStream(true);
  exporting(asExport(failing));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(started, 1);
  assert.equal(failing.failure?.code, status.INVALID_ARGUMENT);
});

test('an export writes its pages in order (empty ones not), reads the next once a full buffer drained, and ends after the last', async () => {
  const call = new StandInStream(true, [0]);
  const pages = [[timer('a'), timer('b')], [], [timer('c')]];
  const asked: number[] = [];
  const done = writeTimerPages(asExport(call), 0, async (after) => {
    asked.push(after);
    return { timers: pages[after] ?? [], next: after + 1 < pages.length ? after + 1 : undefined };
  });
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(asked, [0], 'the second page waits for drain');
  call.emit('drain');
  await done;
  assert.deepEqual(asked, [0, 1, 2]);
  assert.deepEqual(call.written, [{ timers: [timer('a'), timer('b')] }, { timers: [timer('c')] }]);
  assert.equal(call.ended, true);
});

test('an export the client cancelled reads no further page and does not end the call', async () => {
  const call = new StandInStream(true, [0]);
  const asked: number[] = [];
  const done = writeTimerPages(asExport(call), 0, async (after) => {
    asked.push(after);
    return { timers: [timer(String(after))], next: after + 1 };
  });
  await new Promise((resolve) => setImmediate(resolve));
  call.cancelled = true;
  call.emit('cancelled');
  await done;
  assert.deepEqual(asked, [0]);
  assert.equal(call.ended, false);
});
