// cli/serve/stop-signals.ts: which stop signals start the drain, which are the same stop
// delivered twice, and which force the exit. The clock is the test's.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sameStopWindowMs, StopSignals } from '../../cli/serve/stop-signals.ts';

function signalsAt(): { signals: StopSignals; advance: (ms: number) => void } {
  let nowMs = 1_000;
  return { signals: new StopSignals(() => nowMs), advance: (ms) => (nowMs += ms) };
}

test('SIGTERM exits 1 without draining under the older-Node launcher: the group\'s SIGTERM and the forwarded one are one stop', () => {
  const { signals, advance } = signalsAt();
  assert.equal(signals.take('SIGTERM'), 'stop');
  advance(3);
  assert.equal(signals.take('SIGTERM'), 'same-stop');
  advance(sameStopWindowMs - 10);
  assert.equal(signals.take('SIGTERM'), 'same-stop', 'still within the window of the first');
});

test('the same signal after the window forces the exit: a person pressing Ctrl-C again', () => {
  const { signals, advance } = signalsAt();
  assert.equal(signals.take('SIGINT'), 'stop');
  advance(1);
  assert.equal(signals.take('SIGINT'), 'same-stop');
  advance(sameStopWindowMs);
  assert.equal(signals.take('SIGINT'), 'exit-now');
});

test('a different signal while stopping forces the exit at once', () => {
  const { signals, advance } = signalsAt();
  assert.equal(signals.take('SIGTERM'), 'stop');
  advance(1);
  assert.equal(signals.take('SIGINT'), 'exit-now');
});
