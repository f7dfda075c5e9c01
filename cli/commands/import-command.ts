// `fermata import FILE`: timers from an Arrow, Parquet, CSV or NDJSON file, sent as Arrow
// batches (cli/import/timer-arrow.ts) through @fermata/client's addArrow, within the server's
// GET /v1/limits, with a bounded number in flight (cli/import/import-run.ts),
// resumable from a checkpoint, with a progress bar on a terminal and plain lines otherwise, and
// a summary at the end (with --json, one JSON object, the bench's figures among it).
import { existsSync } from 'node:fs';
import { basename } from 'node:path';
import { type Command, Option } from 'commander';
import { Checkpoint, defaultCheckpointPath, fileHash, readCheckpoint, resumeRow } from '../import/checkpoint.ts';
import { keepImportHeapSmall } from '../import/import-heap.ts';
import { type ImportSummary, runImport, type TimerBatchSender } from '../import/import-run.ts';
import { mappingText, parseMapping, sliceTimerRows, timerFields, type TimerRows } from '../import/mapping.ts';
import { timerArrowStream } from '../import/timer-arrow.ts';
import { type FermataClient, FermataError, type Limits } from '../../clients/typescript/src/index.ts';
import { formatOf, openSource } from '../import/open-file.ts';
import { barProgress, lineProgress, type ProgressView } from '../import/progress.ts';
import { collect, type ConnectionOptions, connected, examples, positiveArg, printJson, withClient } from './common.ts';

interface ImportOptions extends ConnectionOptions {
  readonly map?: string[];
  readonly set?: string[];
  readonly format?: string;
  readonly resume?: boolean;
  readonly checkpoint?: string;
  readonly batchRows: number;
  readonly concurrency: number;
  readonly progress: 'auto' | 'bar' | 'lines' | 'none';
  readonly json?: boolean;
}

/** How often the checkpoint is written while batches are answered. */
const checkpointEveryMs = 250;
/** Seconds between plain progress lines. */
const progressLineEveryMs = 2000;

const quiet: ProgressView = { update: () => undefined, stop: () => undefined };

function progressView(mode: ImportOptions['progress'], sizeBytes: number): ProgressView {
  const tty = process.stdout.isTTY === true;
  if (mode === 'none') return quiet;
  if (mode === 'bar' || (mode === 'auto' && tty)) return barProgress(process.stdout, sizeBytes);
  // Lines go to stderr when stdout carries the --json summary.
  return lineProgress(process.stderr, sizeBytes, progressLineEveryMs);
}

async function importFile(file: string, options: ImportOptions): Promise<void> {
  if (!existsSync(file)) throw new Error(`${file}: no such file`);
  keepImportHeapSmall();
  const format = formatOf(file, options.format);
  const checkpointPath = options.checkpoint ?? defaultCheckpointPath(file);
  const source = await openSource(file, format);
  const mapping = parseMapping(file, options.map ?? [], options.set ?? [], source.columnNames);
  const hash = await fileHash(file);
  const mappingLine = mappingText(mapping);
  let startRow = 0;
  const saved = await readCheckpoint(checkpointPath);
  if (options.resume === true) {
    if (saved === undefined) throw new Error(`--resume: no checkpoint at ${checkpointPath} (an import writes one as it goes; --checkpoint names another)`);
    startRow = resumeRow(checkpointPath, saved, hash, mappingLine);
  } else if (saved !== undefined && saved.hash === hash && saved.acknowledged > 0) {
    process.stderr.write(`fermata import: ${checkpointPath} says ${saved.acknowledged} rows were acknowledged; starting from row 0 (they are sent again and answered as duplicates); --resume starts after them\n`);
  }
  const checkpoint = new Checkpoint(checkpointPath, { file: basename(file), sizeBytes: source.sizeBytes, hash, mapping: mappingLine }, startRow);
  const summary = await withClient(options, async (client) => {
    const limits = await client.limits();
    const sender: TimerBatchSender = { send: async (rows) => ({ duplicates: await sendRows(client, limits, rows) }) };
    return runImport({
      file,
      source,
      mapping,
      fileHash: hash,
      sender,
      concurrency: options.concurrency,
      batchRows: Math.min(options.batchRows, limits.batch_rows_max),
      checkpoint,
      progress: progressView(options.progress, source.sizeBytes),
      checkpointEveryMs,
    });
  });
  report(summary, checkpointPath, options.json === true);
}

/**
 * Sends a batch as one Arrow stream, or, when its bytes pass the server's limits, as halves one
 * after the other; resolves with the rows whose key was known. A refusal's `row` is the batch's.
 */
async function sendRows(client: FermataClient, limits: Limits, rows: TimerRows): Promise<number> {
  const body = timerArrowStream(rows);
  if (body.byteLength > Math.min(limits.batch_body_bytes_max, limits.batch_logged_bytes_max) && rows.rows > 1) {
    const half = rows.rows >> 1;
    const first = await sendRows(client, limits, sliceTimerRows(rows, 0, half));
    try {
      return first + (await sendRows(client, limits, sliceTimerRows(rows, half, rows.rows)));
    } catch (err) {
      throw err instanceof FermataError ? err.shiftedBy(half) : err;
    }
  }
  return (await client.addArrow(body)).duplicates;
}

function report(summary: ImportSummary, checkpointPath: string, json: boolean): void {
  const rssPeakMb = Math.round(process.resourceUsage().maxRSS / 1024);
  if (json) {
    printJson({ file: summary.file, format: summary.format, rows: summary.rows, resumed_at: summary.resumedAt, duplicates: summary.duplicates, seconds: Number(summary.seconds.toFixed(3)), rows_per_s: summary.rowsPerS, rss_peak_mb: rssPeakMb, checkpoint: checkpointPath });
    return;
  }
  const resumed = summary.resumedAt > 0 ? `, resumed at row ${summary.resumedAt}` : '';
  const duplicates = summary.duplicates > 0 ? `; ${summary.duplicates} were there already (their key was known)` : '';
  process.stdout.write(`imported ${summary.file}: ${summary.rows} rows in ${summary.seconds.toFixed(1)} s (${summary.rowsPerS} rows/s)${resumed}${duplicates}\ncheckpoint: ${checkpointPath}\n`);
}

export function importCommand(program: Command): void {
  const command = connected(program.command('import'))
    .description('add the timers of an Arrow (.arrow/.arrows), Parquet, CSV or NDJSON file, resumably')
    .argument('<file>', 'the file; its format is told by its extension (or --format)')
    .option('--map <field=column,...>', `a file column that fills a timer field (fields: ${timerFields.join(', ')}); repeatable. A column named like a field fills it without --map`, collect)
    .option('--set <field=value>', 'one value for every row (e.g. --set queue=billing, --set target=https://…); repeatable', collect)
    .option('--format <format>', 'arrow, parquet, csv or ndjson, when the extension does not say')
    .option('--resume', 'skip the rows the checkpoint says were acknowledged')
    .option('--checkpoint <path>', 'where the checkpoint is kept (default: FILE.fermata-import.json)')
    .option('--batch-rows <n>', 'rows a batch sent', positiveArg, 10_000)
    .option('--concurrency <n>', 'batches in flight at most', positiveArg, 2)
    .addOption(new Option('--progress <mode>', 'a bar on a terminal, lines otherwise (auto), or as named').choices(['auto', 'bar', 'lines', 'none']).default('auto'))
    .option('--json', 'print the summary as one JSON object')
    .action((file: string, options: ImportOptions) => importFile(file, options));
  examples(command, [
    'fermata import timers.parquet',
    'fermata import orders.csv --map fire_at=due_at,target=webhook_url,key=order_id --set queue=billing',
    'fermata import timers.parquet --resume',
  ]);
  command.addHelpText(
    'after',
    '\nRows without a key column get the key import:{file hash}:{row}, so a --resume or a second run never adds a row twice.\n' +
      'fire_at may be a timestamp column, epoch milliseconds or RFC 3339 text; headers a JSON object (text or, in NDJSON, an object).\n',
  );
}
