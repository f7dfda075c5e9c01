// The import pipeline: read a batch, map it, send it, while up to `concurrency` batches are in
// flight; the reader is asked for the next batch only when a slot is free, so a slow service
// holds the reading back and memory stays at about `concurrency` batches. Each answered batch
// moves the checkpoint (checkpoint.ts); the first failure stops reading, lets the batches in
// flight finish, saves the checkpoint and is thrown, naming the file's row where the service
// or the mapping said which.
//
// The sender is the transport (import-command.ts: timer-arrow.ts's Arrow stream through the
// TypeScript client's addArrow): it resolves once the batch is durable, retries what passes by
// itself (429/503), and rejects with the service's error, whose `row` is the batch's row.
import type { Checkpoint } from './checkpoint.ts';
import { ImportError } from './import-error.ts';
import { type Mapping, mapBatch, type TimerField, type TimerRows } from './mapping.ts';
import type { ProgressView } from './progress.ts';
import type { Source, SourceFormat } from './source.ts';

export interface BatchAnswer {
  /** Rows whose key fermata held already (a resume's resent rows, a re-run). */
  readonly duplicates: number;
}

export interface TimerBatchSender {
  /** Sends the batch's timers; resolves once they are durable. */
  send(rows: TimerRows): Promise<BatchAnswer>;
}

export interface ImportOptions {
  readonly file: string;
  readonly source: Source;
  readonly mapping: Mapping;
  readonly fileHash: string;
  readonly sender: TimerBatchSender;
  readonly concurrency: number;
  readonly batchRows: number;
  readonly checkpoint: Checkpoint;
  readonly progress: ProgressView;
  /** How often the checkpoint is written while rows are acknowledged. */
  readonly checkpointEveryMs: number;
}

export interface ImportSummary {
  readonly file: string;
  readonly format: SourceFormat;
  /** Rows skipped because the checkpoint had them (--resume). */
  readonly resumedAt: number;
  /** Rows sent and acknowledged by this run. */
  readonly rows: number;
  /** Of those, rows fermata held already (their key was known). */
  readonly duplicates: number;
  readonly seconds: number;
  readonly rowsPerS: number;
}

/** The error a sender rejects with, as far as the import reads it (the client's typed errors have these). */
interface ServiceError {
  readonly message: string;
  readonly row?: unknown;
  readonly field?: unknown;
  readonly column?: unknown;
}

const fieldOfView: Readonly<Partial<Record<string, keyof TimerRows>>> = {
  fire_at: 'fireAtMs',
  delay_ms: 'delayMs',
  target: 'target',
  payload: 'payload',
  headers: 'headers',
  key: 'key',
  queue: 'queue',
  callback: 'callback',
  failure_callback: 'failureCallback',
};

/** The service's refusal of a batch, said of the file's row, column and value where it named a row. */
function refusal(err: unknown, file: string, mapping: Mapping, rows: TimerRows): Error {
  if (err instanceof ImportError || typeof err !== 'object' || err === null || !('message' in err)) return err as Error;
  const service = err as ServiceError;
  const field = typeof service.field === 'string' ? service.field : typeof service.column === 'string' ? service.column : undefined;
  if (typeof service.row !== 'number' || service.row < 0 || service.row >= rows.rows) {
    return new ImportError(`${file} rows ${rows.firstRow}–${rows.firstRow + rows.rows - 1}: fermata refused the batch: ${service.message}`);
  }
  const source = field === undefined ? undefined : mapping.fields.get(field as TimerField);
  const column = source === undefined ? field : 'column' in source ? source.column : `--set ${field}`;
  const view = field === undefined ? undefined : fieldOfView[field];
  const values = view === undefined ? undefined : (rows[view] as ArrayLike<unknown> | undefined);
  const raw = values?.[service.row];
  const value = view === 'fireAtMs' && typeof raw === 'number' ? new Date(raw) : raw;
  const place = { file, row: rows.firstRow + service.row, ...(column === undefined ? {} : { column }), ...(values === undefined ? {} : { value }) };
  return new ImportError(`fermata refused it: ${service.message}`, place);
}

export async function runImport(options: ImportOptions): Promise<ImportSummary> {
  const { file, source, mapping, sender, checkpoint, progress } = options;
  const started = performance.now();
  const resumedAt = checkpoint.acknowledged;
  const inFlight = new Set<Promise<void>>();
  let failure: Error | undefined;
  let rowsDone = 0;
  let duplicates = 0;
  let bytesDone = 0;
  /** The end byte of each batch, to show how far into the file the acknowledged rows reach. */
  const endByteByRow = new Map<number, number>();
  let lastSave = performance.now();

  const answered = (rows: TimerRows, answer: BatchAnswer): void => {
    rowsDone += rows.rows;
    duplicates += answer.duplicates;
    endByteByRow.set(rows.firstRow + rows.rows, rows.endByte);
    checkpoint.acknowledge(rows.firstRow, rows.rows);
    const reached = endByteByRow.get(checkpoint.acknowledged);
    if (reached !== undefined) bytesDone = reached;
    for (const row of endByteByRow.keys()) if (row <= checkpoint.acknowledged) endByteByRow.delete(row);
    progress.update(checkpoint.acknowledged, bytesDone);
    if (performance.now() - lastSave >= options.checkpointEveryMs) {
      lastSave = performance.now();
      void checkpoint.save();
    }
  };

  try {
    for await (const batch of source.batches(resumedAt, options.batchRows)) {
      if (failure !== undefined) break;
      const rows = mapBatch(mapping, batch, file, options.fileHash);
      const sent = sender.send(rows).then(
        (answer) => answered(rows, answer),
        (err: unknown) => {
          failure ??= refusal(err, file, mapping, rows);
        },
      );
      const tracked = sent.finally(() => inFlight.delete(tracked));
      inFlight.add(tracked);
      while (inFlight.size >= options.concurrency) await Promise.race(inFlight);
    }
  } catch (err) {
    failure ??= err as Error;
  } finally {
    await Promise.all(inFlight);
    await checkpoint.save();
    progress.stop();
    await source.close();
  }
  if (failure !== undefined) throw failure;
  const seconds = (performance.now() - started) / 1000;
  return { file, format: source.format, resumedAt, rows: rowsDone, duplicates, seconds, rowsPerS: seconds > 0 ? Math.round(rowsDone / seconds) : rowsDone };
}
