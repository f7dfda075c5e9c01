// One stream of GET /v1/events (ingest/http/routes/events.ts) on its own: a reader that stops
// reading is let go once it leaves eventStreamLimits.unreadBytesMax unread, instead of the
// service buffering for it without end; a watched timer is told when it changes, and once gone.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TimerView } from '../../engine/engine.ts';
import { eventStreamLimits } from '../../ingest/http/route-limits.ts';
import { EventStream } from '../../ingest/http/routes/events.ts';
import { timerView } from '../../ingest/http/timer-views.ts';

const frame = `event: counters\ndata: ${JSON.stringify({ padding: 'x'.repeat(4000) })}\n\n`;

test('a stream whose reader stopped reading ends once it holds unreadBytesMax unread', () => {
  const stream = new EventStream(async () => undefined, undefined, undefined);
  let written = 0;
  while (!stream.out.writableEnded && written < 2 * eventStreamLimits.unreadBytesMax) {
    stream.counters(frame);
    written += frame.length;
  }
  assert.equal(stream.out.writableEnded, true, 'ended');
  assert.ok(written > eventStreamLimits.unreadBytesMax && written <= eventStreamLimits.unreadBytesMax + 2 * frame.length, `ended after ${written} bytes written`);
  stream.counters(frame); // and nothing more is written to it
});

test('a watched timer: told when it changes, not when it does not, and once when it is gone', async () => {
  const added: TimerView = {
    id: '0000000004000001m8vgw5r0',
    state: 'pending',
    revision: 1,
    fireAtMs: 1_796_220_000_000,
    dueAtMs: 1_796_220_000_000,
    attempts: 0,
    queue: 'default',
    target: 'https://a.example/',
    key: null,
    lastStatus: null,
    lastError: null,
    lastAttemptAtMs: null,
    nextAttemptAtMs: null,
    callback: null,
    failureCallback: null,
    headers: {},
    payload: new Uint8Array(0),
    createdAtMs: null,
  };
  let current: TimerView | undefined = added;
  let looked = 0;
  const stream = new EventStream(
    async () => {
      looked++;
      return current === undefined ? undefined : timerView.json(current);
    },
    added.id,
    undefined,
  );
  const text: string[] = [];
  stream.out.setEncoding('utf8').on('data', (chunk: string) => text.push(chunk));
  const tick = async (): Promise<void> => {
    stream.counters('event: counters\ndata: {}\n\n');
    await new Promise((resolve) => setImmediate(resolve));
  };
  await tick(); // first look: a change from nothing seen
  await tick(); // the same: nothing told
  current = { ...added, state: 'delivering', attempts: 1 };
  await tick();
  current = undefined;
  await tick();
  await tick(); // gone: no more looks
  const events = text.join('').match(/^event: (timer|timer-gone)$/gm);
  assert.deepEqual(events, ['event: timer', 'event: timer', 'event: timer-gone']);
  assert.equal(looked, 4);
});
