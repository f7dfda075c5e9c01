// The `clients` suite: `fermata import` of a Parquet file as a user runs it, against Arrow
// ingest of the same rows, in the same run. N rows (10,000,000; --quick 300,000) of far-future
// timers (fire_at spread over 30 days from an hour ahead, one target, a 128-byte payload that
// differs a row) are written to a Parquet file under --dir (hyparquet-writer, Snappy, row groups
// of 100,000). Then, each against a fresh `fermata serve` child:
//
//   arrow ingest   this process posts the same rows as 10,000-row Arrow IPC streams, 4 requests
//                  in flight on one HTTP/2 session, with keys as long as the import's derived
//                  ones (the server's key index costs the same): the rate the service takes
//   import         `fermata import FILE --json` as a child process (its defaults: 10,000-row
//                  batches through @fermata/client, 2 in flight), timed from spawn to exit
//
//   clients.import.rows_per_s   N ÷ the import's wall time (start-up and file hash included)
//   clients.import.ratio        that ÷ the Arrow ingest's rows per second (target ≥ 0.7)
//   clients.import.rss_mb       the importing process's peak resident set (target ≤ 300): the
//                               `fermata import` child's own maxRSS (getrusage), from its --json
//                               summary; neither the service's nor this process's
//   clients.arrow.rows_per_s    the Arrow ingest's rate, for the ratio's reader
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import http2 from 'node:http2';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { type Data, Field, makeData, RecordBatch, Schema, Struct, Table, tableToIPC, Timestamp, TimeUnit, Utf8 } from 'apache-arrow';
import { fileWriter, ParquetWriter, schemaFromColumnData } from 'hyparquet-writer';
import { fermataBin, startFermata } from './fermata-child.ts';
import { type Figure, metaLine, roundTo, type SuiteOptions } from './report.ts';

const suite = 'clients';
const rowGroupRows = 100_000;
const arrowBatchRows = 10_000;
const arrowInFlight = 4;
const payloadBytes = 128;
const hourMs = 3_600_000;
const spanMs = 30 * 24 * hourMs;
// A reserved name (RFC 2606) that never resolves: nothing is delivered anywhere.
const target = 'https://example.invalid/fermata-bench';
/** Stands in for the import's file hash in the Arrow ingest's keys, so both key columns are as long. */
const arrowKeyHash = 'a'.repeat(32);

/** The rows [start, start + n) of the benchmark's file: the same for the Parquet file and the Arrow ingest. */
interface Rows {
  readonly fireAtMs: Float64Array;
  readonly payload: string[];
}

function rowsAt(nowMs: number, start: number, n: number): Rows {
  const fireAtMs = new Float64Array(n);
  const payload = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    const row = start + i;
    // A fixed spread (no randomness): row r is due (r × a large prime mod span) after the hour.
    fireAtMs[i] = nowMs + hourMs + ((row * 7919 * 104_729) % spanMs);
    payload[i] = String(row).padStart(payloadBytes, 'x');
  }
  return { fireAtMs, payload };
}

async function writeParquet(path: string, nowMs: number, rows: number): Promise<void> {
  let writer: ParquetWriter | undefined;
  for (let start = 0; start < rows; start += rowGroupRows) {
    const n = Math.min(rowGroupRows, rows - start);
    const { fireAtMs, payload } = rowsAt(nowMs, start, n);
    const columnData = [
      { name: 'fire_at', data: Array.from(fireAtMs, (ms) => new Date(ms)), type: 'TIMESTAMP' as const },
      { name: 'target', data: new Array<string>(n).fill(target), type: 'STRING' as const },
      { name: 'payload', data: payload, type: 'STRING' as const },
    ];
    writer ??= new ParquetWriter({ writer: fileWriter(path), schema: schemaFromColumnData({ columnData }) });
    writer.write({ columnData, rowGroupSize: rowGroupRows });
  }
  writer?.finish();
}

const encoder = new TextEncoder();

function utf8(values: readonly string[]): Data<Utf8> {
  const parts = values.map((value) => encoder.encode(value));
  const offsets = new Int32Array(parts.length + 1);
  for (let i = 0; i < parts.length; i++) offsets[i + 1] = (offsets[i] as number) + (parts[i] as Uint8Array).length;
  const bytes = new Uint8Array(offsets[parts.length] as number);
  for (let i = 0; i < parts.length; i++) bytes.set(parts[i] as Uint8Array, offsets[i] as number);
  return makeData({ type: new Utf8(), length: parts.length, valueOffsets: offsets, data: bytes });
}

function arrowBody(nowMs: number, start: number, n: number): Uint8Array {
  const { fireAtMs, payload } = rowsAt(nowMs, start, n);
  const keys = Array.from({ length: n }, (_, i) => `arrow:${arrowKeyHash}:${start + i}`);
  const columns = [
    ['fire_at', makeData({ type: new Timestamp(TimeUnit.MILLISECOND, 'UTC'), length: n, data: BigInt64Array.from(fireAtMs, (ms) => BigInt(ms)) })],
    ['target', utf8(new Array<string>(n).fill(target))],
    ['payload', utf8(payload)],
    ['key', utf8(keys)],
  ] as const;
  const schema = new Schema(columns.map(([name, data]) => new Field(name, data.type, false)));
  const struct = makeData({ type: new Struct(schema.fields), length: n, children: columns.map(([, data]) => data) });
  return tableToIPC(new Table([new RecordBatch(schema, struct)]), 'stream');
}

function post(session: http2.ClientHttp2Session, body: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = session.request({ ':method': 'POST', ':path': '/v1/timers', 'content-type': 'application/vnd.apache.arrow.stream' });
    let status = 0;
    let answer = '';
    request.on('response', (headers) => (status = Number(headers[':status'])));
    request.setEncoding('utf8').on('data', (chunk: string) => (answer += chunk));
    request.on('end', () => (status === 201 ? resolve() : reject(new Error(`arrow ingest: ${status} ${answer.slice(0, 200)}`))));
    request.on('error', reject);
    request.end(body);
  });
}

/** Rows a second of Arrow ingest of the benchmark's rows into a fresh service. */
async function arrowIngest(options: SuiteOptions, nowMs: number, rows: number): Promise<number> {
  const fermata = await startFermata(options.baseDir, 'clients-arrow');
  const session = http2.connect(fermata.url);
  try {
    let next = 0;
    const started = performance.now();
    const worker = async (): Promise<void> => {
      while (next < rows) {
        const start = next;
        const n = Math.min(arrowBatchRows, rows - start);
        next += n;
        await post(session, arrowBody(nowMs, start, n));
      }
    };
    await Promise.all(Array.from({ length: arrowInFlight }, worker));
    return rows / ((performance.now() - started) / 1000);
  } finally {
    session.close();
    await fermata.stop();
  }
}

interface ImportRun {
  readonly rowsPerS: number;
  readonly rssMb: number;
}

/** `fermata import FILE --json` into a fresh service, timed from spawn to exit. */
async function importRun(options: SuiteOptions, file: string, rows: number): Promise<ImportRun> {
  const fermata = await startFermata(options.baseDir, 'clients-import');
  try {
    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('FERMATA_')));
    const started = performance.now();
    const child = spawn(process.execPath, [fermataBin, 'import', file, '--json', '--progress', 'none', '--checkpoint', `${file}.checkpoint.json`], { env: { ...env, FERMATA_URL: fermata.url }, stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    const [code] = (await once(child, 'close')) as [number | null];
    const seconds = (performance.now() - started) / 1000;
    if (code !== 0) throw new Error(`fermata import exited ${code}`);
    const summary = JSON.parse(stdout) as { rows: number; rss_peak_mb: number };
    if (summary.rows !== rows) throw new Error(`fermata import sent ${summary.rows} rows of ${rows}`);
    return { rowsPerS: rows / seconds, rssMb: summary.rss_peak_mb };
  } finally {
    await fermata.stop();
  }
}

export async function clientsSuite(options: SuiteOptions): Promise<Figure[]> {
  const rows = options.quick ? 300_000 : 10_000_000;
  const dir = await mkdtemp(join(options.baseDir, 'fermata-bench-clients-'));
  try {
    const file = join(dir, 'timers.parquet');
    const nowMs = Date.now();
    options.progress(`clients: writing ${rows} rows to ${file}`);
    await writeParquet(file, nowMs, rows);
    const fileBytes = (await stat(file)).size;
    options.progress('clients: Arrow ingest of the same rows');
    const arrowPerS = await arrowIngest(options, nowMs, rows);
    options.progress('clients: fermata import');
    const imported = await importRun(options, file, rows);
    return [
      metaLine(suite, { rows, file_mb: roundTo(fileBytes / 1048576, 1), row_group_rows: rowGroupRows, payload_bytes: payloadBytes, arrow_batch_rows: arrowBatchRows, arrow_in_flight: arrowInFlight, quick: options.quick }),
      { suite, name: 'clients.import.rows_per_s', value: Math.round(imported.rowsPerS), unit: '1/s' },
      { suite, name: 'clients.import.ratio', value: roundTo(imported.rowsPerS / arrowPerS, 3), unit: 'ratio' },
      { suite, name: 'clients.import.rss_mb', value: imported.rssMb, unit: 'MB' },
      { suite, name: 'clients.arrow.rows_per_s', value: Math.round(arrowPerS), unit: '1/s' },
    ];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
