// What the manifest records about a run: where each piece of the file is and its checksum
// (docs/format/spill.md, "Run metadata"). Plain JSON-able data, kept in memory by the engine
// for every spilled run: one small object per batch, none per timer.
import { isReadableVersion, isRunId } from './format.ts';

/** One record batch of a run: all of a time bucket, or a consecutive part of a large one. */
export interface RunBucket {
  /** The bucket's start: floor(dueAt / bucketWidthMs) · bucketWidthMs of every row in it. */
  readonly startMs: number;
  readonly rows: number;
  /** Rows with an idempotency key: the batch's section of the keys sidecar holds this many hashes. */
  readonly keyed: number;
  /** Where the batch's encapsulated message (metadata and body) starts in the run file. */
  readonly fileOffset: number;
  readonly byteLength: number;
  /** CRC-32 of those bytes as written. */
  readonly crc32: number;
}

export interface RunMeta {
  readonly runId: number;
  /** The spill format version the run was written in: which columns its batches hold. */
  readonly version: number;
  /** The WAL sequence of the checkpoint that wrote it (for a compacted run: its newest input's). */
  readonly stamp: number;
  readonly bucketWidthMs: number;
  readonly rows: number;
  /** The run file's size. */
  readonly bytes: number;
  /** The head (magic and schema message) is [0, headBytes). */
  readonly headBytes: number;
  readonly headCrc32: number;
  /** The tail (eos, footer, footer length, magic) is [tailOffset, bytes). */
  readonly tailOffset: number;
  readonly tailCrc32: number;
  /** The keys sidecar's size. */
  readonly keysBytes: number;
  readonly buckets: readonly RunBucket[];
}

const isCount = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
const isCrc = (value: unknown): value is number => isCount(value) && value <= 0xffffffff;
const isTime = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value);

/** Why `value` is not a well-formed RunMeta, or undefined when it is. */
export function runMetaProblem(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return 'a run is not an object';
  const run = value as Record<string, unknown>;
  if (!isRunId(run.runId)) return `bad run id ${String(run.runId)}`;
  const name = `run ${run.runId}`;
  if (!isReadableVersion(run.version)) return `${name}: version ${String(run.version)} is not one this release reads`;
  for (const key of ['stamp', 'rows', 'bytes', 'headBytes', 'tailOffset', 'keysBytes'] as const) {
    if (!isCount(run[key])) return `${name}: bad ${key}`;
  }
  if (!isCount(run.bucketWidthMs) || run.bucketWidthMs === 0) return `${name}: bad bucketWidthMs`;
  if (!isCrc(run.headCrc32) || !isCrc(run.tailCrc32)) return `${name}: bad head or tail crc`;
  if (!Array.isArray(run.buckets)) return `${name}: buckets is not a list`;
  let at = run.headBytes as number;
  let rows = 0;
  let startMs = -Infinity;
  for (const [index, entry] of (run.buckets as unknown[]).entries()) {
    if (typeof entry !== 'object' || entry === null) return `${name}: bucket ${index} is not an object`;
    const bucket = entry as Record<string, unknown>;
    if (!isTime(bucket.startMs) || !isCount(bucket.rows) || !isCount(bucket.keyed) || !isCount(bucket.fileOffset) || !isCount(bucket.byteLength) || !isCrc(bucket.crc32)) {
      return `${name}: bucket ${index} has a bad field`;
    }
    if (bucket.rows === 0 || bucket.keyed > bucket.rows) return `${name}: bucket ${index} has bad row counts`;
    if (bucket.fileOffset !== at) return `${name}: bucket ${index} does not start where the one before it ends`;
    if (bucket.startMs < startMs || bucket.startMs % (run.bucketWidthMs as number) !== 0) return `${name}: bucket ${index} is out of order or misaligned`;
    startMs = bucket.startMs;
    at += bucket.byteLength;
    rows += bucket.rows;
  }
  if (at !== run.tailOffset || (run.tailOffset as number) > (run.bytes as number)) return `${name}: the batches do not end where the tail starts`;
  if (rows !== run.rows) return `${name}: bucket rows do not add up to ${run.rows}`;
  return undefined;
}
