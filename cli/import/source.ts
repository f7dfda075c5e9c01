// What `fermata import` reads, whatever the file's format: a source opened once, then read as
// batches of rows held as columns (one array a column, never an object a row), from a row on.
// The readers (read-arrow.ts, read-parquet.ts, read-csv.ts, read-ndjson.ts; open-file.ts picks
// one by the file's name) run on the import's one thread; each yields a batch only when the pipeline asks for the next one, so a slow
// service holds the reading back (backpressure) and a file is never in memory whole.

/** One column's values for a batch's rows: strings, numbers, bigints, bytes, objects or null. */
export type SourceColumn = ArrayLike<unknown>;

export interface SourceBatch {
  /** The file's row number (0-based, among the data rows) of the batch's first row. */
  readonly firstRow: number;
  readonly rows: number;
  /** By column name; a name the batch lacks (an NDJSON file's rows need not share keys) reads as null. */
  readonly columns: ReadonlyMap<string, SourceColumn>;
  /** How far into the file this batch reaches, in bytes (exact for CSV and NDJSON, close for Arrow and Parquet). */
  readonly endByte: number;
}

export interface Source {
  readonly format: SourceFormat;
  readonly sizeBytes: number;
  /** Data rows in the file when its format says so up front (Arrow IPC file, Parquet), else undefined. */
  readonly totalRows: number | undefined;
  /** The columns every row has, when the format names them up front (all but NDJSON). */
  readonly columnNames: readonly string[] | undefined;
  /** Batches of at most `batchRows` rows (Arrow and Parquet: at most the file's own batch or row group), from row `skipRows` on. */
  batches(skipRows: number, batchRows: number): AsyncIterable<SourceBatch>;
  close(): Promise<void>;
}

export const sourceFormats = ['arrow', 'parquet', 'csv', 'ndjson'] as const;
export type SourceFormat = (typeof sourceFormats)[number];
