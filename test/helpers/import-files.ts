// Small files of timers in each format `fermata import` reads, written by the test that needs
// them: the same rows as an Arrow IPC file and stream, Parquet (hyparquet-writer, several row
// groups), CSV and NDJSON. Row i is due at `baseMs + i` and its payload is `p{i}`.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Table, tableToIPC, TimestampMillisecond, Utf8, vectorFromArray } from 'apache-arrow';
import { parquetWriteFile } from 'hyparquet-writer';

export const baseMs = 1_900_000_000_000;

export interface ImportFiles {
  readonly arrowFile: string;
  readonly arrowStream: string;
  readonly parquet: string;
  readonly csv: string;
  readonly ndjson: string;
}

/** Writes `rows` timers targeting `target`, with a `due` column (not `fire_at`: the tests map it) and `payload`. */
export function writeImportFiles(dir: string, rows: number, target: string, rowGroupRows = 100): ImportFiles {
  const due = Array.from({ length: rows }, (_, i) => baseMs + i);
  const payload = Array.from({ length: rows }, (_, i) => `p${i}`);
  const targets = Array.from({ length: rows }, () => target);
  const table = new Table({
    due: vectorFromArray(due.map((ms) => ms), new TimestampMillisecond()),
    url: vectorFromArray(targets, new Utf8()),
    payload: vectorFromArray(payload, new Utf8()),
  });
  const files: ImportFiles = {
    arrowFile: join(dir, 'timers.arrow'),
    arrowStream: join(dir, 'timers.arrows'),
    parquet: join(dir, 'timers.parquet'),
    csv: join(dir, 'timers.csv'),
    ndjson: join(dir, 'timers.ndjson'),
  };
  writeFileSync(files.arrowFile, tableToIPC(table, 'file'));
  writeFileSync(files.arrowStream, tableToIPC(table, 'stream'));
  parquetWriteFile({
    filename: files.parquet,
    columnData: [
      { name: 'due', data: due.map((ms) => new Date(ms)), type: 'TIMESTAMP' },
      { name: 'url', data: targets, type: 'STRING' },
      { name: 'payload', data: payload, type: 'STRING' },
    ],
    rowGroupSize: rowGroupRows,
  });
  writeFileSync(files.csv, `due,url,payload\n${due.map((ms, i) => `${new Date(ms).toISOString()},${target},${payload[i]}`).join('\n')}\n`);
  writeFileSync(files.ndjson, `${due.map((ms, i) => JSON.stringify({ due: ms, url: target, payload: payload[i] })).join('\n')}\n`);
  return files;
}
