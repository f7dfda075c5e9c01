// /v1/schedules in cluster mode: a schedule belongs to the partition of its name's hash
// (partitionOfKey(name), as a timer's key), whose engine holds its records and makes its
// occurrences, so it lives on with the partition through a takeover. Registered by the cluster
// front (front.ts); main thread, fastify's.
//
//   PUT, GET, DELETE /v1/schedules/{name}, POST …/pause, …/resume
//                       → the name's partition, here or at its owner (one hop)
//   GET /v1/schedules   every partition asked for a page after the cursor, merged by name: a
//                       name is in one partition only, so the page's last name is the cursor
//                       for every partition
//
// What each route does on the engine is the single node's (routes/schedules.ts); a replace, a
// pause and a delete (even one finding the schedule gone) of a schedule of partition p ≠ 0 also
// cancel the occurrences `fermata cluster import` left of it in partition 0
// (imported-occurrences.ts), once its own change is durable. A partition that cannot answer
// fails the request (503 PARTITION_MOVING, or what its owner answered).
import type { FastifyReply, FastifyRequest, RouteGenericInterface } from 'fastify';
import type http2 from 'node:http2';
import type { Engine } from '../../../engine/engine.ts';
import { scheduleLimits } from '../../../engine/limits.ts';
import { partitionOfKey } from '../../../cluster/partitioning.ts';
import {
  type NameParams,
  pauseActions,
  scheduleActions,
  scheduleDeletedSchema,
  type ScheduleListBody,
  type ScheduleListQuery,
  scheduleListQuerySchema,
  scheduleListSchema,
  scheduleSchema,
} from '../routes/schedules.ts';
import type { CleartextListener } from '../listen/cleartext-listener.ts';
import type { HttpServer } from '../types.ts';
import type { PartitionCall } from './fan-out.ts';
import { partitionHeader } from './fan-out.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { cancelLeftOccurrences } from './imported-occurrences.ts';

/** Serves a request on its partition: `local` on the engine here, else the request as its owner answers it. */
export type OnPartition = <G extends RouteGenericInterface>(
  partition: number,
  request: FastifyRequest<G, CleartextListener, http2.Http2ServerRequest>,
  reply: FastifyReply<G, CleartextListener, http2.Http2ServerRequest, http2.Http2ServerResponse>,
  local: (engine: Engine) => Promise<unknown>,
) => Promise<unknown>;

export interface ClusterScheduleRoutesOptions {
  readonly partitions: number;
  readonly onPartition: OnPartition;
  readonly call: PartitionCall;
  /** The one partition a forwarded request is to answer for, else undefined (every partition). */
  readonly onlyPartition: (headers: Readonly<Record<string, string | string[] | undefined>>) => number | undefined;
}

export function clusterScheduleRoutes(app: HttpServer, { partitions, onPartition, call, onlyPartition }: ClusterScheduleRoutesOptions): void {
  const partitionOf = (name: string): number => partitionOfKey(name, partitions);
  /** What a replace, pause or delete also cancels in partition 0 when the schedule is another partition's (imported-occurrences.ts). */
  const cancelLeftIn0 = async (name: string, authorization: string | undefined): Promise<void> => {
    if (partitionOf(name) !== 0) await cancelLeftOccurrences(call, name, authorization);
  };

  app.put<{ Params: NameParams; Body: unknown }>('/v1/schedules/:name', { schema: { response: { 200: scheduleSchema } } }, async (request, reply) =>
    onPartition(partitionOf(request.params.name), request, reply, async (engine) => {
      const replacing = engine.schedule(request.params.name) !== undefined;
      const answer = await scheduleActions.put(engine, request.params.name, request.body);
      if (replacing) await cancelLeftIn0(request.params.name, request.headers.authorization);
      return answer;
    }),
  );

  app.get<{ Params: NameParams }>('/v1/schedules/:name', { schema: { response: { 200: scheduleSchema } } }, async (request, reply) =>
    onPartition(partitionOf(request.params.name), request, reply, async (engine) => scheduleActions.get(engine, request.params.name)),
  );

  app.delete<{ Params: NameParams }>('/v1/schedules/:name', { schema: { response: { 200: scheduleDeletedSchema } } }, async (request, reply) =>
    onPartition(partitionOf(request.params.name), request, reply, async (engine) => {
      let answer;
      try {
        answer = await scheduleActions.delete(engine, request.params.name);
      } catch (err) {
        // Gone already: a DELETE sent again after partition 0 could not answer cancels what is left there all the same.
        if (err instanceof HttpProblem && err.code === httpErrorCodes.notFound) await cancelLeftIn0(request.params.name, request.headers.authorization);
        throw err;
      }
      await cancelLeftIn0(request.params.name, request.headers.authorization);
      return answer;
    }),
  );

  for (const [action, paused] of pauseActions) {
    app.post<{ Params: NameParams }>(`/v1/schedules/:name/${action}`, { schema: { response: { 200: scheduleSchema } } }, async (request, reply) =>
      onPartition(partitionOf(request.params.name), request, reply, async (engine) => {
        const answer = await scheduleActions.setPaused(engine, request.params.name, paused);
        if (paused) await cancelLeftIn0(request.params.name, request.headers.authorization);
        return answer;
      }),
    );
  }

  app.get<{ Querystring: ScheduleListQuery }>('/v1/schedules', { schema: { querystring: scheduleListQuerySchema, response: { 200: scheduleListSchema } } }, async (request) => {
    const limit = request.query.limit ?? scheduleLimits.listLimitDefault;
    const { cursor } = request.query;
    const pageOf = (partition: number): Promise<ScheduleListBody> => {
      const params = new URLSearchParams({ limit: String(limit) });
      if (cursor !== undefined) params.set('cursor', cursor);
      return call<ScheduleListBody>(partition, async (engine) => scheduleActions.list(engine, limit, cursor), {
        method: 'GET',
        path: `/v1/schedules?${params.toString()}`,
        headers: { ...request.headers, accept: 'application/json', [partitionHeader]: String(partition) },
      });
    };
    const only = onlyPartition(request.headers);
    if (only !== undefined) return pageOf(only);
    const pages = await Promise.all(Array.from({ length: partitions }, (_, partition) => pageOf(partition)));
    const all = pages.flatMap((page) => page.schedules).sort((a, b) => (String(a.name) < String(b.name) ? -1 : 1));
    const schedules = all.slice(0, limit);
    // More after this page: some partition gave more than was taken, or has more than it gave.
    const more = all.length > limit || pages.some((page) => page.next_cursor !== null);
    return { schedules, next_cursor: more && schedules.length > 0 ? String(schedules.at(-1)?.name) : null };
  });
}
