// bench/progress.ts draws its bar only on a terminal outside CI: a piped stream or CI=true
// gets plain message lines and not one carriage return or escape; a terminal gets the bar,
// redrawn after each message, and a cleared line at the end.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { progressBar, renderBar, shouldDraw } from '../../bench/progress.ts';

function fakeStream(isTTY: boolean): { isTTY: boolean; columns: number; written: string[]; write(text: string): boolean } {
  const written: string[] = [];
  return { isTTY, columns: 100, written, write: (text) => written.push(text) > 0 };
}

test('a piped stream gets message lines only', () => {
  const stream = fakeStream(false);
  const bar = progressBar(stream, 4, {});
  bar.update(1, 'store');
  bar.log('store: admitting');
  bar.finish();
  assert.equal(bar.drawn, false);
  assert.deepEqual(stream.written, ['store: admitting\n']);
});

test('a terminal under CI gets message lines only', () => {
  const stream = fakeStream(true);
  const bar = progressBar(stream, 4, { CI: 'true' });
  bar.update(1, 'store');
  bar.log('hello');
  bar.finish();
  assert.deepEqual(stream.written, ['hello\n']);
  assert.equal(shouldDraw(stream, { CI: '' }), true);
  assert.equal(shouldDraw(stream, { CI: '1' }), false);
});

test('a terminal gets the bar, redrawn under each message, cleared at the end', () => {
  const stream = fakeStream(true);
  const bar = progressBar(stream, 4, {});
  bar.update(2, 'ingest');
  bar.log('ingest: streams');
  bar.finish();
  assert.equal(bar.drawn, true);
  const all = stream.written.join('');
  assert.match(all, /\[#{12}\.{12}\] 2\/4 ingest {2}0 s/);
  assert.ok(all.includes('\r\x1b[2Kingest: streams\n'), 'the message clears the bar first');
  assert.ok(all.endsWith('\r\x1b[2K'), 'finish clears the line');
});

test('a terminal that reports no width still gets the whole bar', () => {
  const stream = { ...fakeStream(true), columns: 0 };
  const bar = progressBar(stream, 2, {});
  bar.update(1, 'wal');
  bar.finish();
  assert.match(stream.written.join(''), /\[#{12}\.{12}\] 1\/2 wal/);
});

test('the bar fills in proportion and fits the terminal width', () => {
  assert.equal(renderBar(0, 4, 'wal', 3.7, 200), `[${'.'.repeat(24)}] 0/4 wal  3 s`);
  assert.equal(renderBar(4, 4, 'wal', 0, 200), `[${'#'.repeat(24)}] 4/4 wal  0 s`);
  assert.equal(renderBar(1, 4, 'a very long label indeed', 0, 20).length, 19);
});
