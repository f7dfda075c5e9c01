// Whether the service is ready to take writes: the one verdict behind GET /readyz
// (ingest/http/routes/health.ts) and the gRPC health service (ingest/grpc/readiness-health.ts),
// so the two cannot differ. Not ready while the log is poisoned (a failed write or fsync: it
// acknowledges nothing more), while the data directory's file system is nearly full when a disk
// check is given, and until the delivery workers are warm when a warm flag is given. Main thread.
import type { Engine } from '../engine/engine.ts';
import type { DiskSpaceCheck } from './http/listen/disk-space.ts';

export interface ReadinessSources {
  readonly engine: Engine;
  /** When given, not ready while the data directory's file system is nearly full. */
  readonly disk?: DiskSpaceCheck | undefined;
  /** When given, not ready until it returns true (the dispatcher's warm-up after a start). */
  readonly warm?: (() => boolean) | undefined;
}

export interface NotReady {
  readonly reason: string;
  /** The free bytes read, when the disk is why. */
  readonly freeBytes?: number;
}

/** Why the service is not ready, or undefined when it is. */
export async function notReady({ engine, disk, warm }: ReadinessSources): Promise<NotReady | undefined> {
  const space = disk === undefined ? undefined : await disk.verdict();
  const poison = engine.log.poisoned;
  if (poison !== undefined) return { reason: poison.message };
  if (space !== undefined && !space.ok) return space.freeBytes === undefined ? { reason: space.reason } : { reason: space.reason, freeBytes: space.freeBytes };
  if (warm !== undefined && !warm()) return { reason: 'the delivery workers are warming up' };
  return undefined;
}
