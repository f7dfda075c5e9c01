// `fermata import`'s heap growth (cli/import/import-heap.ts): set for the import unless the
// command line names V8's --heap-growing-percent (in either spelling, or negated), which wins.
// What it does to the importer's peak resident set is the clients bench's clients.import.rss_mb.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { importHeapGrowingPercent, keepImportHeapSmall } from '../../cli/import/import-heap.ts';

test('the import sets V8\'s heap growth to its own, below the service\'s', () => {
  assert.equal(keepImportHeapSmall([]), `--heap-growing-percent=${importHeapGrowingPercent}`);
  assert.ok(importHeapGrowingPercent < 300, 'below what bin/heap-growth.js gives the service');
});

test('a --heap-growing-percent on the command line wins', () => {
  for (const execArgv of [['--heap-growing-percent=200'], ['--heap_growing_percent=200'], ['--no-heap-growing-percent']]) {
    assert.equal(keepImportHeapSmall(execArgv), undefined, execArgv.join(' '));
  }
});
