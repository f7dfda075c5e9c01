// The reads and bulk changes of cluster mode that span partitions: each partition asked where it
// is (this node's engine, or its owner with `fermata-partition` naming the one partition it is
// to answer for), the answers merged as one node's would be. Registered by the cluster front
// (front.ts); main thread.
//
//   GET /v1/timers                 pages merged in (fire_at, id) order; the cursor holds each
//                                  partition's own cursor (null once it is exhausted); with
//                                  Accept: Arrow, the export (arrow-export.ts)
//   POST /v1/timers/cancel         counts summed; ids go to their partitions only
//   DELETE /v1/queues/{name}/timers   the same, for the queue's filter
//   GET /v1/dead                   pages merged oldest first (created_at, id); the cursor holds
//                                  the last id each partition gave
//
// A partition that cannot answer fails the whole request (503 PARTITION_MOVING, or what its
// owner answered): a list page is whole or not given, and a bulk cancel sent again cancels what
// is left.
import type { BulkCancelOutcome, BulkCancelTarget, Engine, TimerFilter } from '../../../engine/engine.ts';
import { decodeCursor, queryStart } from '../../../engine/engine.ts';
import { clusterIdOf, clusterIdParts, partitionPrefixLength } from '../../../cluster/partitioning.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { deadTimerView } from '../timer-views.ts';
import { deadQuerySchema } from '../routes/dead.ts';
import { bulkCancelTargetOf, checkListQuery, limitOf, listQuerySchema } from '../routes/timer-list.ts';
import { type FilterFields, timerFilterOf } from '../timer-filter.ts';
import { timerView } from '../timer-views.ts';
import type { HttpServer } from '../types.ts';
import { mediaTypes } from '../media-types.ts';
import type { ClusterArrowExport } from './arrow-export.ts';
import type { ForwardRequest } from './forwarder.ts';
import { byFieldThenId, mergePages } from './merge-pages.ts';

export const partitionHeader = 'fermata-partition';

/** Asks one partition: `local` on its engine here, else `request` at its owner (whose 200 answer's JSON is the result). */
export type PartitionCall = <T>(partition: number, local: (engine: Engine) => Promise<T>, request: ForwardRequest) => Promise<T>;

export interface FanOutOptions {
  readonly partitions: number;
  readonly call: PartitionCall;
  /** The one partition a forwarded request is to answer for, else undefined (every partition). */
  readonly onlyPartition: (headers: Readonly<Record<string, string | string[] | undefined>>) => number | undefined;
  /** The Arrow export of GET /v1/timers (arrow-export.ts). */
  readonly exportArrow: ClusterArrowExport;
}

interface ListQuery extends FilterFields {
  readonly limit?: string;
  readonly cursor?: string;
}

interface DeadPage {
  readonly dead: Record<string, unknown>[];
  readonly next_cursor: string | null;
}

interface Page {
  readonly timers: Record<string, unknown>[];
  readonly next_cursor: string | null;
}

/** A cluster list cursor: every partition's engine cursor, '' for its start, null once it has given all. */
function encodeClusterCursor(cursors: readonly (string | null)[]): string {
  return Buffer.from(JSON.stringify(cursors)).toString('base64url');
}

/** A cluster cursor's entries, each checked by `isCursor` (a partition's own cursor); a 400 naming the cursor when it is not one. */
function decodeClusterCursor(cursor: string | undefined, partitions: number, isCursor: (entry: string) => boolean): (string | null)[] {
  if (cursor === undefined) return new Array<string | null>(partitions).fill('');
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    value = undefined;
  }
  const valid = Array.isArray(value) && value.length === partitions && value.every((entry) => entry === null || entry === '' || (typeof entry === 'string' && isCursor(entry)));
  if (!valid) throw new HttpProblem(httpErrorCodes.requestInvalid, `cursor ${JSON.stringify(cursor)} is not one: pass a page's next_cursor as it came`, 'cursor');
  return value as (string | null)[];
}

export function fanOutRoutes(app: HttpServer, { partitions, call, onlyPartition, exportArrow }: FanOutOptions): void {
  const every = Array.from({ length: partitions }, (_, partition) => partition);
  const partitionsOf = (headers: Readonly<Record<string, string | string[] | undefined>>): number[] => {
    const only = onlyPartition(headers);
    return only === undefined ? every : [only];
  };

  app.get<{ Querystring: ListQuery }>('/v1/timers', { schema: { querystring: listQuerySchema }, preValidation: async (request) => checkListQuery(request.query) }, async (request, reply) => {
    const { query } = request;
    const filter: TimerFilter = timerFilterOf(query);
    if (request.headers.accept?.toLowerCase().includes(mediaTypes.arrowStream) === true) {
      const one = onlyPartition(request.headers);
      const from = one === undefined ? decodeClusterCursor(query.cursor, partitions, (entry) => decodeCursor(entry) !== undefined) : undefined;
      const parts = from === undefined ? [{ partition: one as number, cursor: query.cursor ?? '' }] : from.flatMap((cursor, partition) => (cursor === null ? [] : [{ partition, cursor }]));
      return reply.code(200).type(mediaTypes.arrowStream).send(exportArrow(filter, parts, query, request.headers));
    }
    const limit = limitOf(query.limit);
    const pageOf = (partition: number, cursor: string, rows: number): Promise<Page> => {
      const params = new URLSearchParams();
      for (const [name, value] of Object.entries(query)) if (name !== 'cursor' && name !== 'limit' && typeof value === 'string') params.set(name, value);
      params.set('limit', String(rows));
      if (cursor !== '') params.set('cursor', cursor);
      return call<Page>(
        partition,
        async (engine) => {
          const page = await engine.listTimers(filter, rows, cursor === '' ? queryStart : (decodeCursor(cursor) ?? queryStart));
          return { timers: page.timers.map((timer) => ({ ...timerView.json(timer), id: clusterIdOf(partition, timer.id) })), next_cursor: page.nextCursor };
        },
        { method: 'GET', path: `/v1/timers?${params.toString()}`, headers: { ...request.headers, accept: 'application/json', [partitionHeader]: String(partition) } },
      );
    };
    const only = onlyPartition(request.headers);
    if (only !== undefined) {
      // A forwarded request for one partition: its page, with the engine's own cursor.
      if (query.cursor !== undefined && decodeCursor(query.cursor) === undefined) throw new HttpProblem(httpErrorCodes.requestInvalid, `cursor ${JSON.stringify(query.cursor)} is not one of this partition's`, 'cursor');
      return pageOf(only, query.cursor ?? '', limit);
    }
    const cursors = decodeClusterCursor(query.cursor, partitions, (entry) => decodeCursor(entry) !== undefined);
    const open = every.filter((partition) => cursors[partition] !== null);
    const pages = new Map<number, Page>();
    await Promise.all(open.map(async (partition) => pages.set(partition, await pageOf(partition, cursors[partition] as string, limit))));
    const { items: timers, taken } = mergePages(new Map([...pages].map(([partition, page]) => [partition, page.timers])), limit, byFieldThenId('fire_at'));
    // Each partition's next cursor: its page's when all of it was taken; after the last one taken
    // otherwise (asked again for just that many, since only the engine can write its cursor).
    const next = [...cursors];
    await Promise.all(
      open.map(async (partition) => {
        const page = pages.get(partition) as Page;
        const count = taken.get(partition) as number;
        if (count === page.timers.length) next[partition] = page.next_cursor;
        else if (count > 0) next[partition] = (await pageOf(partition, cursors[partition] as string, count)).next_cursor;
      }),
    );
    return { timers, next_cursor: next.every((cursor) => cursor === null) ? null : encodeClusterCursor(next) };
  });

  app.get<{ Querystring: { queue?: string; limit: number; cursor?: string } }>('/v1/dead', { schema: { querystring: deadQuerySchema } }, async (request) => {
    const { queue, limit, cursor } = request.query;
    const pageOf = (partition: number, after: string): Promise<DeadPage> => {
      const params = new URLSearchParams({ limit: String(limit) });
      if (queue !== undefined) params.set('queue', queue);
      if (after !== '') params.set('cursor', after);
      return call<DeadPage>(
        partition,
        async (engine) => {
          const page = engine.deadPage(limit, queue, after === '' ? undefined : after);
          if (page === undefined) throw new HttpProblem(httpErrorCodes.requestInvalid, `cursor ${JSON.stringify(after)} is not one: pass a page's next_cursor as it came`, 'cursor');
          return { dead: page.dead.map((timer) => ({ ...deadTimerView.json(timer), id: clusterIdOf(partition, timer.id) })), next_cursor: page.nextCursor };
        },
        { method: 'GET', path: `/v1/dead?${params.toString()}`, headers: { ...request.headers, accept: 'application/json', [partitionHeader]: String(partition) } },
      );
    };
    const only = onlyPartition(request.headers);
    if (only !== undefined) return pageOf(only, cursor ?? '');
    // A partition's dead-letter cursor is the engine id of the last one given.
    const cursors = decodeClusterCursor(cursor, partitions, (entry) => entry.length === 24);
    const open = every.filter((partition) => cursors[partition] !== null);
    const pages = new Map<number, DeadPage>();
    await Promise.all(open.map(async (partition) => pages.set(partition, await pageOf(partition, cursors[partition] as string))));
    const { items: dead, taken } = mergePages(new Map([...pages].map(([partition, page]) => [partition, page.dead])), limit, byFieldThenId('created_at'));
    const next = [...cursors];
    for (const partition of open) {
      const page = pages.get(partition) as DeadPage;
      const count = taken.get(partition) as number;
      if (count === page.dead.length) next[partition] = page.next_cursor;
      else if (count > 0) next[partition] = String((page.dead[count - 1] as Record<string, unknown>).id).slice(partitionPrefixLength);
    }
    return { dead, next_cursor: next.every((entry) => entry === null) ? null : encodeClusterCursor(next) };
  });

  const cancelEverywhere = async (target: BulkCancelTarget, headers: Readonly<Record<string, string | string[] | undefined>>, path: string, method: string, body: unknown): Promise<{ cancelled: number; in_flight: number }> => {
    const asks: Promise<BulkCancelOutcome | { cancelled: number; in_flight: number }>[] = [];
    const send = (partition: number, local: BulkCancelTarget, sent: unknown): void => {
      asks.push(
        call(partition, (engine) => engine.bulkCancel(local), {
          method,
          path,
          // A DELETE goes without a body, so without a content-type (a JSON one with no body is a 400).
          ...(sent === undefined
            ? { headers: { ...headers, [partitionHeader]: String(partition) } }
            : { headers: { ...headers, 'content-type': 'application/json', [partitionHeader]: String(partition) }, body: Buffer.from(JSON.stringify(sent)) }),
        }),
      );
    };
    const wanted = partitionsOf(headers);
    if ('ids' in target) {
      // Each id to its own partition; a string that is no id of this cluster cancels nothing.
      const byPartition = new Map<number, { engineIds: string[]; ids: string[] }>();
      for (const id of target.ids) {
        const parts = clusterIdParts(id, partitions);
        if (parts === undefined || !wanted.includes(parts.partition)) continue;
        let group = byPartition.get(parts.partition);
        if (group === undefined) byPartition.set(parts.partition, (group = { engineIds: [], ids: [] }));
        group.engineIds.push(parts.engineId);
        group.ids.push(id);
      }
      for (const [partition, group] of byPartition) send(partition, { ids: group.engineIds }, { ids: group.ids });
    } else {
      for (const partition of wanted) send(partition, target, body);
    }
    let cancelled = 0;
    let inFlight = 0;
    for (const outcome of await Promise.all(asks)) {
      cancelled += outcome.cancelled;
      inFlight += 'inFlight' in outcome ? outcome.inFlight : outcome.in_flight;
    }
    return { cancelled, in_flight: inFlight };
  };

  app.post<{ Body: unknown }>('/v1/timers/cancel', async (request) => cancelEverywhere(bulkCancelTargetOf(request.body), request.headers, '/v1/timers/cancel', 'POST', request.body));

  app.delete<{ Params: { name: string } }>('/v1/queues/:name/timers', async (request) =>
    cancelEverywhere({ filter: { queue: request.params.name } }, request.headers, request.url, 'DELETE', undefined),
  );
}
