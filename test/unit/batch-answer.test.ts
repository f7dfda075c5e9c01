// The batch add's answer written as bytes (ingest/http/batch-answer.ts) is what JSON.stringify
// gives for the route's object: same fields, order and ids, over real admits of 1, 3 and 10,000
// rows with sequences and fire times that use every character of an id.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine } from '../../engine/engine.ts';
import { newRowsAnswer } from '../../ingest/http/batch-answer.ts';

test('the bytes are JSON.stringify of {accepted, duplicates, ids, revisions, duplicate_rows}', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fermata-batch-answer-'));
  const engine = await Engine.open({ dataDir: dir });
  try {
    for (const rows of [1, 3, 10_000]) {
      const base = Date.now() + 3_600_000;
      const admitted = await engine.admit(batchFromSpecs(Array.from({ length: rows }, (_, row) => ({ fireAtMs: base + row * 7_919, target: 'https://a.example/hook', payload: new Uint8Array([row & 0xff]) }))));
      const ids = Array.from({ length: rows }, (_, row) => admitted.idOf(row));
      const expected = JSON.stringify({ accepted: rows, duplicates: 0, ids, revisions: new Array<number>(rows).fill(1), duplicate_rows: [] });
      assert.equal(newRowsAnswer(admitted).toString('latin1'), expected, `${rows} rows`);
    }
    const keyed = batchFromSpecs([{ fireAtMs: Date.now() + 60_000, target: 'https://a.example/hook', payload: new Uint8Array(0), key: 'k' }]);
    await engine.admit(keyed);
    const again = await engine.admit(keyed);
    assert.equal(again.duplicates, 1);
    assert.throws(() => newRowsAnswer(again), /without duplicates only/);
  } finally {
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
