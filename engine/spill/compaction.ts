// Compaction: merges runs into one new run, dropping the rows the caller says are gone
// (tombstoned, or promoted: due before the watermark or before the input's validFromMs).
// Streaming: each input holds one batch in memory at a time, the output one batch; the merge
// keeps (dueAt, seq, row) order, so the output is bucketed and batched like any run. Main thread.
//
//   input 0: [b0][b1][b2]…  ─┐
//   input 1: [b0][b1]…      ─┼─► k-way merge (linear min over k cursors) ─► drop? ─► RunWriter
//   input 2: [b0]…          ─┘
import assert from 'node:assert/strict';
import type { FileSystem } from '../fs/file-system.ts';
import { spillLimits } from '../limits.ts';
import { batchFixedBytesPerRow } from './format.ts';
import type { RunMeta } from './run-meta.ts';
import { RunReader } from './run-reader.ts';
import { compareRunRows, type RunRows, RunRowsBuilder } from './run-rows.ts';
import { type RunWriteOptions, RunWriter } from './run-writer.ts';

/** True to leave the row out of the new run; `input` is the index in `inputs` of the run it comes from. */
export type DropRow = (seq: number, row: number, dueAtMs: number, input: number) => boolean;

class Cursor {
  readonly reader: RunReader;
  rows: RunRows | undefined;
  /** -1 before the first advance(). */
  index = -1;
  #batch = -1;

  constructor(reader: RunReader) {
    this.reader = reader;
  }

  /** Moves to the next row, reading the next batch when this one is used up; false at the end. */
  async advance(): Promise<boolean> {
    this.index++;
    while (this.rows === undefined || this.index >= this.rows.rows) {
      this.#batch++;
      if (this.#batch >= this.reader.meta.buckets.length) {
        this.rows = undefined;
        return false;
      }
      this.rows = await this.reader.readBucket(this.#batch);
      this.index = 0;
    }
    return true;
  }
}

/**
 * Writes run `newRunId` stamped `stamp` holding every row of `inputs` that `drop` keeps, in
 * (dueAt, seq, row) order, and its keys sidecar (both fdatasynced, the directory not). A timer
 * present in two inputs must be dropped from all but one (an assertion: the caller's bug).
 */
export async function compactRuns(
  fs: FileSystem,
  dir: string,
  inputs: readonly RunMeta[],
  newRunId: number,
  stamp: number,
  drop: DropRow,
  options: RunWriteOptions = {},
): Promise<RunMeta> {
  const bucketWidthMs = options.bucketWidthMs ?? spillLimits.bucketWidthMs;
  const batchBytesMax = options.batchBytesMax ?? spillLimits.batchBytesMax;
  const batchRowsMax = options.batchRowsMax ?? spillLimits.batchRowsMax;
  const cursors: Cursor[] = [];
  let writer: RunWriter | undefined;
  try {
    for (const meta of inputs) {
      const cursor = new Cursor(await RunReader.open(fs, dir, meta));
      cursors.push(cursor);
      await cursor.advance();
    }
    writer = await RunWriter.create(fs, dir, newRunId, stamp, options);
    let builder = new RunRowsBuilder();
    let bucket = Number.NaN;
    for (;;) {
      let min = -1;
      for (let c = 0; c < cursors.length; c++) {
        const cursor = cursors[c] as Cursor;
        if (cursor.rows === undefined) continue;
        const best = min < 0 ? undefined : (cursors[min] as Cursor);
        if (best === undefined || compareRunRows(cursor.rows, cursor.index, best.rows as RunRows, best.index) < 0) min = c;
      }
      if (min < 0) break;
      const cursor = cursors[min] as Cursor;
      const rows = cursor.rows as RunRows;
      const i = cursor.index;
      const dueAtMs = rows.dueAtMs[i] as number;
      if (!drop(rows.seq[i] as number, rows.row[i] as number, dueAtMs, min)) {
        const rowBucket = Math.floor(dueAtMs / bucketWidthMs);
        const full = builder.rows >= batchRowsMax || builder.variableBytes + batchFixedBytesPerRow * (builder.rows + 1) > batchBytesMax;
        if (builder.rows > 0 && (rowBucket !== bucket || full)) {
          await writer.append(builder.finish());
          builder = new RunRowsBuilder();
        }
        bucket = rowBucket;
        builder.appendFrom(rows, i);
      }
      await cursor.advance();
    }
    if (builder.rows > 0) await writer.append(builder.finish());
    return await writer.finish();
  } catch (err) {
    if (err instanceof assert.AssertionError && /out of \(dueAt, seq, row\) order/.test(err.message)) {
      err.message += ' (compaction: a timer is in two inputs and drop kept both copies)';
    }
    await writer?.abort();
    throw err;
  } finally {
    for (const cursor of cursors) await cursor.reader.close();
  }
}
