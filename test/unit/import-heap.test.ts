// `fermata import`'s heap sizing (cli/import/import-heap.ts): V8's old-generation growth below
// the service's, and the young generation kept at its start-up size, each unless the command
// line sizes it (in either spelling, or negated), which wins. What they do to the importer's
// peak resident set is the clients bench's clients.import.rss_mb.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { importHeapGrowingPercent, keepImportHeapSmall } from '../../cli/import/import-heap.ts';

test('the import sets V8\'s heap growth below the service\'s and keeps the young generation from growing', () => {
  assert.deepEqual(keepImportHeapSmall([]), [`--heap-growing-percent=${importHeapGrowingPercent}`, '--semi-space-growth-factor=1']);
  assert.ok(importHeapGrowingPercent < 300, 'below what bin/heap-growth.js gives the service');
});

test('a sizing on the command line wins', () => {
  for (const execArgv of [['--heap-growing-percent=200'], ['--heap_growing_percent=200'], ['--no-heap-growing-percent']]) {
    assert.deepEqual(keepImportHeapSmall(execArgv), ['--semi-space-growth-factor=1'], execArgv.join(' '));
  }
  for (const execArgv of [['--max-semi-space-size=16'], ['--max_semi_space_size=16'], ['--semi-space-growth-factor=2'], ['--min-semi-space-size=4']]) {
    assert.deepEqual(keepImportHeapSmall(execArgv), [`--heap-growing-percent=${importHeapGrowingPercent}`], execArgv.join(' '));
  }
});
