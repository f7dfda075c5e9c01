// The run API in one place, for the engine: write a run, read one of its batches, read its
// keys, verify it whole. The pieces live one concern a file: run-writer.ts, run-reader.ts,
// keys-file.ts, run-meta.ts (docs/format/spill.md).
export { type RunWriteOptions, RunWriter, writeRun } from './run-writer.ts';
export { readRunBucket, RunReader, verifyRun } from './run-reader.ts';
export { readRunKeys } from './keys-file.ts';
export type { RunBucket, RunMeta } from './run-meta.ts';
