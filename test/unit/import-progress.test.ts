// fermata import's progress: on a terminal a bar with rows, megabytes, rate and ETA; elsewhere
// plain lines a log keeps readable, no more often than asked.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { barProgress, lineProgress } from '../../cli/import/progress.ts';

function capture(tty: boolean): { stream: PassThrough; text: () => string } {
  const stream = Object.assign(new PassThrough(), { isTTY: tty, columns: 160 });
  let text = '';
  stream.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  return { stream, text: () => text };
}

test('a terminal gets a bar with rows, megabytes, rate and ETA', async () => {
  const out = capture(true);
  const bar = barProgress(out.stream, 4 * 1048576);
  await new Promise((resolve) => setTimeout(resolve, 20));
  bar.update(5000, 1048576);
  bar.stop();
  await new Promise((resolve) => setImmediate(resolve));
  assert.match(out.text(), /25% \| 5000 rows \| 1\.0 of 4\.0 MB \| \d+ rows\/s \| ETA \S+/);
});

test('elsewhere a plain line at most every interval', () => {
  const out = capture(false);
  const lines = lineProgress(out.stream, 2 * 1048576, 60_000);
  lines.update(100, 1000);
  assert.equal(out.text(), '', 'no line before the interval passed');
  const eager = lineProgress(out.stream, 2 * 1048576, 0);
  eager.update(0, 0);
  eager.update(20_000, 1048576);
  assert.match(out.text(), /^import: 0 rows, 0\.0 of 2\.0 MB \(0%\), \d+ rows\/s\nimport: 20000 rows, 1\.0 of 2\.0 MB \(50%\), \d+ rows\/s\n$/);
});
