// The occurrences `fermata cluster import` leaves in partition 0 (docs/cluster.md, "Schedules"):
// a schedule whose name hashes to partition p ≠ 0 moves to p, but the occurrences the single
// node had already created stay pending in partition 0 with their ids. A replace, pause or delete
// of the schedule through the cluster cancels those too, as its partition's engine cancels its
// own (engine/schedules/schedules.ts): the pending ones no user changed (revision 1, no attempt
// made), none already being delivered. Partition 0 creates no occurrence of a schedule it does
// not hold, so every `schedule:NAME:` timer it has of such a name is one the import left.
//
//   cancelLeftOccurrences(call, name, authorization)
//     partition 0, here or at its owner (the fan-out's PartitionCall, as GET /v1/timers and
//     POST /v1/timers/cancel ask one partition): its pending `schedule:NAME:` timers a page at
//     a time, then a cancel of the untouched ones by id
//
// A partition 0 that cannot answer fails the request (503 PARTITION_MOVING, or what its owner
// answered); the schedule's own change stands, and the same request sent again cancels what is
// left. Main thread, fastify's (schedule-routes.ts calls it).
import { decodeCursor, type Engine, queryStart, type TimerFilter } from '../../../engine/engine.ts';
import { occurrenceKeyPrefix } from '../../../engine/schedules/occurrence-key.ts';
import { clusterIdOf, partitionPrefixLength } from '../../../cluster/partitioning.ts';
import { timerListLimits } from '../route-limits.ts';
import { type PartitionCall, partitionHeader } from './fan-out.ts';

/** What is read of each listed timer (GET /v1/timers gives the whole view). */
interface Listed {
  readonly id: string;
  readonly revision: number;
  readonly attempts: number;
}

interface Page {
  readonly timers: readonly Listed[];
  readonly next_cursor: string | null;
}

const utf8 = new TextEncoder();

/** Cancels the untouched pending occurrences of schedule `name` that partition 0 holds; `authorization` is the request's, which partition 0's owner checks again. */
export async function cancelLeftOccurrences(call: PartitionCall, name: string, authorization: string | undefined): Promise<void> {
  const prefix = `${occurrenceKeyPrefix}${name}:`;
  const filter: TimerFilter = { keyPrefix: utf8.encode(prefix), state: 'pending' };
  const headers = { ...(authorization === undefined ? {} : { authorization }), accept: 'application/json', [partitionHeader]: '0' };
  const ids: string[] = [];
  for (let cursor = ''; ; ) {
    const params = new URLSearchParams({ state: 'pending', key_prefix: prefix, limit: String(timerListLimits.max) });
    if (cursor !== '') params.set('cursor', cursor);
    const local = async (engine: Engine): Promise<Page> => {
      const page = await engine.listTimers(filter, timerListLimits.max, cursor === '' ? queryStart : (decodeCursor(cursor) ?? queryStart));
      return { timers: page.timers.map((timer) => ({ id: clusterIdOf(0, timer.id), revision: timer.revision, attempts: timer.attempts })), next_cursor: page.nextCursor };
    };
    const page = await call<Page>(0, local, { method: 'GET', path: `/v1/timers?${params.toString()}`, headers });
    for (const timer of page.timers) if (timer.revision === 1 && timer.attempts === 0) ids.push(timer.id);
    if (page.next_cursor === null) break;
    cursor = page.next_cursor;
  }
  if (ids.length === 0) return;
  // Each a cluster id of partition 0 (its prefix, then the engine's id), as both ways of listing give them.
  const engineIds = ids.map((id) => id.slice(partitionPrefixLength));
  await call(0, (engine) => engine.bulkCancel({ ids: engineIds }), {
    method: 'POST',
    path: '/v1/timers/cancel',
    headers: { ...headers, 'content-type': 'application/json' },
    body: Buffer.from(JSON.stringify({ ids })),
  });
}
