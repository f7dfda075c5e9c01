// `.csv`: RFC 4180 through csv-parse, streamed; the first record names the columns. Every value
// is text, an empty cell is null (no key: a derived one; no queue: `default`), and the mapping
// reads numbers and times out of the text.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { once } from 'node:events';
import { parse, type Parser } from 'csv-parse';
import { ImportError } from './import-error.ts';
import type { Source, SourceBatch, SourceColumn } from './source.ts';

function parserOf(path: string): Parser {
  const parser = parse({ bom: true, skip_empty_lines: true });
  createReadStream(path).on('error', (err) => parser.destroy(err)).pipe(parser);
  return parser;
}

async function readHeader(path: string): Promise<string[]> {
  const parser = parserOf(path);
  try {
    for await (const record of parser) return record as string[];
    throw new ImportError(`${path}: empty; a CSV file's first line names its columns`);
  } finally {
    parser.destroy();
  }
}

export async function openCsv(path: string): Promise<Source> {
  const sizeBytes = (await stat(path)).size;
  const columnNames = await readHeader(path);
  if (new Set(columnNames).size !== columnNames.length) throw new ImportError(`${path}: the header names a column twice (${columnNames.join(', ')})`);

  async function* batches(skipRows: number, batchRows: number): AsyncGenerator<SourceBatch> {
    const parser = parserOf(path);
    let row = -1; // the header is not a row
    let firstRow = skipRows;
    let columns = columnNames.map(() => [] as (string | null)[]);
    const take = (): SourceBatch => {
      const batch: SourceBatch = { firstRow, rows: columns[0]?.length ?? 0, columns: new Map<string, SourceColumn>(columnNames.map((name, i) => [name, columns[i] as SourceColumn])), endByte: parser.info.bytes };
      firstRow += batch.rows;
      columns = columnNames.map(() => []);
      return batch;
    };
    try {
      for await (const record of parser as AsyncIterable<string[]>) {
        if (row++ < skipRows) continue;
        if (record.length !== columnNames.length) {
          throw new ImportError(`has ${record.length} fields, the header ${columnNames.length} (line ${parser.info.lines})`, { file: path, row: row - 1 });
        }
        for (let i = 0; i < record.length; i++) (columns[i] as (string | null)[]).push(record[i] === '' ? null : (record[i] as string));
        if ((columns[0]?.length ?? 0) >= batchRows) yield take();
      }
      if ((columns[0]?.length ?? 0) > 0) yield take();
    } catch (err) {
      if (err instanceof ImportError) throw err;
      throw new ImportError(`${path}: not valid CSV near line ${parser.info.lines} (${(err as Error).message})`);
    } finally {
      parser.destroy();
      if (!parser.readableEnded) await once(parser, 'close').catch(() => undefined);
    }
  }

  return { format: 'csv', sizeBytes, totalRows: undefined, columnNames, batches, close: async () => undefined };
}
