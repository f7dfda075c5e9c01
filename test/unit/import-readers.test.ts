// fermata import's readers and mapping over the same rows in each format: every row comes out
// once, in order, with the fire time, target and payload it was written with and a derived key;
// a resume's skip starts at the row asked; Parquet is read a row group at a time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type Mapping, mapBatch, parseMapping } from '../../cli/import/mapping.ts';
import { formatOf, openSource } from '../../cli/import/open-file.ts';
import type { SourceBatch } from '../../cli/import/source.ts';
import { timerArrowStream } from '../../cli/import/timer-arrow.ts';
import { batchFromArrow } from '../../engine/batch/arrow-codec.ts';
import { bytesAt } from '../../engine/batch/timer-batch.ts';
import { arrowIpcTestData } from '../helpers/fixtures.ts';
import { baseMs, writeImportFiles } from '../helpers/import-files.ts';
import { testScratch } from '../helpers/scratch.ts';

const scratch = testScratch('import-readers');
const dir = scratch.tempDir('files');
const rowCount = 250;
const target = 'https://hooks.example/t';
const files = writeImportFiles(dir, rowCount, target, 100);
const hash = '0123456789abcdef0123456789abcdef';

async function readAll(path: string, skipRows: number, batchRows: number): Promise<{ batches: SourceBatch[]; mapping: Mapping }> {
  const source = await openSource(path, formatOf(path, undefined));
  const mapping = parseMapping(path, ['fire_at=due,target=url'], [], source.columnNames);
  const batches: SourceBatch[] = [];
  for await (const batch of source.batches(skipRows, batchRows)) batches.push(batch);
  await source.close();
  return { batches, mapping };
}

for (const [name, path] of Object.entries(files)) {
  test(`${name}: every row once, in order, mapped and derived-keyed, through the Arrow fermata decodes`, async () => {
    const { batches, mapping } = await readAll(path, 0, 40);
    assert.equal(batches.reduce((sum, batch) => sum + batch.rows, 0), rowCount);
    let next = 0;
    for (const batch of batches) {
      assert.equal(batch.firstRow, next);
      assert.ok(batch.rows <= 40);
      next += batch.rows;
      // The batch as the service reads it: the engine's own Arrow decoder.
      const decoded = batchFromArrow(timerArrowStream(mapBatch(mapping, batch, path, hash)), 0, 100_000, 'client');
      for (let i = 0; i < batch.rows; i++) {
        const row = batch.firstRow + i;
        assert.equal(decoded.fireAtMs[i], baseMs + row);
        assert.equal(decoded.targets[decoded.targetIndex[i] as number], target);
        assert.equal(Buffer.from(bytesAt(decoded.payload, i)).toString(), `p${row}`);
        assert.equal(Buffer.from(bytesAt(decoded.keys, i)).toString(), `import:${hash}:${row}`);
      }
    }
    assert.ok(batches.at(-1)!.endByte > 0);
  });

  test(`${name}: a resume starts at the row asked`, async () => {
    const { batches } = await readAll(path, 137, 1000);
    assert.equal(batches[0]?.firstRow, 137);
    assert.equal(batches.reduce((sum, batch) => sum + batch.rows, 0), rowCount - 137);
  });
}

test('parquet is read a row group at a time, whatever the batch size asked', async () => {
  const { batches } = await readAll(files.parquet, 0, 100_000);
  assert.deepEqual(batches.map((batch) => batch.rows), [100, 100, 50]);
  assert.deepEqual(batches.map((batch) => batch.firstRow), [0, 100, 200]);
});

test('an Arrow stream without the mapped columns is refused naming them and the columns it has', async () => {
  const path = fileURLToPath(new URL('valid/generated_primitive.stream', arrowIpcTestData));
  const source = await openSource(path, 'arrow');
  assert.throws(() => parseMapping(path, ['fire_at=due,target=url'], [], source.columnNames), /no column "due", "url"; its columns are bool_nullable/);
  await source.close();
});

test('a name that says no format is refused with the names it knows; --format overrides', () => {
  assert.throws(() => formatOf('timers.txt', undefined), /cannot tell the format.*\.parquet, \.csv or \.ndjson, or give --format/);
  assert.equal(formatOf('timers.txt', 'csv'), 'csv');
  assert.throws(() => formatOf('timers.txt', 'xlsx'), /--format must be one of arrow, parquet, csv, ndjson/);
});
