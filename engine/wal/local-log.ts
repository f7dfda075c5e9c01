// The local WAL as the engine's DurableLog: opens the segmented log in one directory, sized and
// replayed in the one pass recovery makes over the segments. The default log of every engine.
import { isKnownRecordType, recordSetVersion, recordTypeKnownMax } from '../format-version.ts';
import type { FileSystem } from '../fs/file-system.ts';
import { nodeFileSystem } from '../fs/node-file-system.ts';
import type { WalLimits } from '../limits.ts';
import type { DurableLog, LogOpener, LogOpenRequest } from '../log.ts';
import { recordHeaderBytes } from './format.ts';
import { segmentBytesOnDisk } from './recovery.ts';
import { Wal, type WalLogger } from './wal.ts';

export interface LocalLogOptions {
  readonly dir: string;
  readonly fs?: FileSystem | undefined;
  readonly limits?: Partial<WalLimits> | undefined;
  readonly logger?: WalLogger | undefined;
}

/** An opener of the WAL in `options.dir` (created if needed; locked against other processes). */
export function localLog(options: LocalLogOptions): LogOpener {
  return (request) => openLocalLog(options, request);
}

async function openLocalLog(options: LocalLogOptions, { coveredSeq, replay, onPoisoned }: LogOpenRequest): Promise<DurableLog> {
  const fs = options.fs ?? nodeFileSystem;
  // Replay counts records in their framed size, as the segment files hold them.
  replay.expectBytes(await segmentBytesOnDisk(fs, options.dir));
  return Wal.open({
    dir: options.dir,
    coveredSeq,
    replay: (seq, type, body) => replay.record(seq, type, body, recordHeaderBytes + body.length),
    recordTypes: { known: isKnownRecordType, describe: `record types 1–${recordTypeKnownMax}, record-type set ${recordSetVersion}` },
    fs,
    ...(options.limits === undefined ? {} : { limits: options.limits }),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    ...(onPoisoned === undefined ? {} : { onPoisoned }),
  });
}
