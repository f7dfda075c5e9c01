// `.ndjson` / `.jsonl`: one JSON object a line, read as a stream; a blank line is not a row (as
// POST /v1/timers counts them). The rows need not share keys: a key a row lacks reads as null.
// Values keep their JSON types, so `payload` or `headers` may be an object.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { ImportError } from './import-error.ts';
import type { Source, SourceBatch, SourceColumn } from './source.ts';

export async function openNdjson(path: string): Promise<Source> {
  const sizeBytes = (await stat(path)).size;

  async function* batches(skipRows: number, batchRows: number): AsyncGenerator<SourceBatch> {
    const input = createReadStream(path);
    const lines = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
    let row = 0;
    let line = 0;
    let byte = 0;
    let firstRow = skipRows;
    let objects: Record<string, unknown>[] = [];
    const take = (): SourceBatch => {
      const columns = new Map<string, SourceColumn>();
      for (const [i, object] of objects.entries()) {
        for (const name of Object.keys(object)) {
          let values = columns.get(name) as unknown[] | undefined;
          if (values === undefined) columns.set(name, (values = new Array<unknown>(objects.length).fill(null)));
          values[i] = object[name];
        }
      }
      const batch: SourceBatch = { firstRow, rows: objects.length, columns, endByte: byte };
      firstRow += objects.length;
      objects = [];
      return batch;
    };
    try {
      for await (const text of lines) {
        line++;
        byte += Buffer.byteLength(text) + 1;
        if (text.trim() === '') continue;
        if (row++ < skipRows) continue;
        let value: unknown;
        try {
          value = JSON.parse(text);
        } catch (err) {
          throw new ImportError(`line ${line} is not JSON (${(err as Error).message})`, { file: path, row: row - 1 });
        }
        if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ImportError(`line ${line} is not a JSON object`, { file: path, row: row - 1 });
        objects.push(value as Record<string, unknown>);
        if (objects.length >= batchRows) yield take();
      }
      if (objects.length > 0) yield take();
    } finally {
      lines.close();
      input.destroy();
    }
  }

  return { format: 'ndjson', sizeBytes, totalRows: undefined, columnNames: undefined, batches, close: async () => undefined };
}
