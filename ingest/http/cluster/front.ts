// The cluster front: in cluster mode (server.ts installs it instead of the single-engine timer
// routes) every request on a timer acts on the engine of the timer's partition, on this node or,
// forwarded once, on its owner's (cluster/router.ts decides where; forwarder.ts sends). Ids in
// answers are cluster ids (cluster/partitioning.ts). Main thread, fastify's.
//
//   POST /v1/timers  one JSON timer → its partition (keyed) or one this node owns (unkeyed:
//                                     the turn's, router.ts)
//                    NDJSON / Arrow  → validated whole, rows split by partition, each part
//                                      appended by its owner; a part that fails → the part's
//                                      error (503 + Retry-After when it is an owner gone) with
//                                      the rows that were accepted (partial-batch.ts)
//   GET, PATCH, DELETE /v1/timers/{id}, POST /v1/dead/{id}/retry, DELETE /v1/dead/{id}
//                    → the id's partition
//   GET /v1/timers, /v1/dead, POST /v1/timers/cancel, DELETE /v1/queues/{name}/timers
//                    → every partition, merged (fan-out.ts)
//   GET /v1/stats, /v1/cluster  this node's partitions and the cluster's (cluster-stats.ts)
//   /v1/schedules…   → the partition of the schedule's name (schedule-routes.ts)
//   POST /v1/timers/stream  each line where its one-timer add would go (stream-admitter.ts)
//   POST /v1/timers  forwardedAddsMediaType, from another node only: several one-timer adds,
//                    each answered as alone (forwarded-adds.ts)
//   /v1/queues…      the cluster's queue table, counts from every node (queue-routes.ts)
//
// A request another node forwarded (`fermata-forwarded`, with the cluster secret: anything else
// carrying that header is 401) is never forwarded again: what this node does not own now is
// PARTITION_MOVING, 503 with Retry-After, and the client's retry finds the new owner.
import type { FastifyReply, FastifyRequest, RouteGenericInterface } from 'fastify';
import type http2 from 'node:http2';
import { hash, timingSafeEqual } from 'node:crypto';
import type { Admitted, Clock, Engine } from '../../../engine/engine.ts';
import { errorCodes, FermataError } from '../../../engine/errors.ts';
import { ingestLimits, timerLimits } from '../../../engine/limits.ts';
import { batchFromArrow } from '../../../engine/batch/arrow-codec.ts';
import { checkAddQueues, checkArrowAddQueues } from '../../auth/batch-queues.ts';
import { bytesAt, defaultQueue } from '../../../engine/batch/timer-batch.ts';
import { validateBatch } from '../../../engine/batch/validate.ts';
import { clusterIdOf, clusterIdParts } from '../../../cluster/partitioning.ts';
import type { PartitionDirectory } from '../../../cluster/partition-directory.ts';
import { ClusterRouter, type PartitionRoute, splitBatch } from '../../../cluster/router.ts';
import { batchFromNdjson, inJsonTerms, specFromJsonTimer } from '../body/json-batch.ts';
import { callerOf } from '../listen/bearer-auth.ts';
import { arrowGaveDelay, type DelayRows, duplicateRowsJson } from '../../duplicate-answers.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { mediaTypeOf, mediaTypes } from '../media-types.ts';
import { singleAddAnswer } from '../single-add.ts';
import { timerView } from '../timer-views.ts';
import type { CleartextListener } from '../listen/cleartext-listener.ts';
import type { HttpServer } from '../types.ts';
import { parseIfMatch, patchTimer, revisionMismatchMessage } from '../routes/timer-patch.ts';
import { type ForwardAnswer, Forwarder, forwardedHeader, type ForwardRequest, secretHeader } from './forwarder.ts';
import { clusterArrowExport } from './arrow-export.ts';
import { clusterStatsRoutes } from './cluster-stats.ts';
import { fanOutRoutes, partitionHeader, type PartitionCall } from './fan-out.ts';
import { type TraceHeaders, traceHeadersOf, traceparentHeader, tracestateHeader, withTrace } from '../../../engine/trace-context.ts';
import { clusterScheduleRoutes, type OnPartition } from './schedule-routes.ts';
import { ClusterStreamAdmitter } from './stream-admitter.ts';
import { answerForwardedAdds, ForwardedAdds, forwardedAddsMediaType, type OwnerAnswer } from './forwarded-adds.ts';
import type { LineAdmitter } from '../timer-stream.ts';
import { timerStreamRoutes } from '../routes/timer-stream.ts';
import type { ClusterQueues } from '../../../cluster/cluster-queues.ts';
import { clusterQueueRoutes } from './queue-routes.ts';
import { admitParts, arrowRowsAsNdjson, ndjsonRows, type PartAdmitter, type PartAnswer } from './partial-batch.ts';

export interface ClusterFrontOptions {
  readonly directory: PartitionDirectory;
  /** The cluster secret forwarded requests carry (config `cluster.secret`, FERMATA_CLUSTER_SECRET). */
  readonly secret: string;
  /** How long an owner has to answer a forwarded request; default 5 s. */
  readonly forwardTimeoutMs?: number;
  /** The clock delay_ms counts from. */
  readonly clock: Clock;
  /** The cluster's queue configs (queue-routes.ts); absent without a cluster database. */
  readonly queues?: ClusterQueues | undefined;
  /** Installs the server's raw HTTP/2 single-add path with the front's routing, and PATCH's (server.ts does: cluster/raw-patch.ts); absent, fastify serves every add and PATCH. */
  readonly fastSingleAdd?: ((admitterFor: (headers: http2.IncomingHttpHeaders) => LineAdmitter | undefined) => void) | undefined;
}

const defaultForwardTimeoutMs = 5000;
const utf8 = new TextDecoder();

interface IdParams {
  readonly id: string;
}

type Request<G extends RouteGenericInterface> = FastifyRequest<G, CleartextListener, http2.Http2ServerRequest>;
type Reply<G extends RouteGenericInterface> = FastifyReply<G, CleartextListener, http2.Http2ServerRequest, http2.Http2ServerResponse>;
type OnTimer = { Params: IdParams; Body: unknown };

/** Replies as the owner answered a forwarded request: its status, body and the headers that carry meaning. */
function relay(reply: Reply<RouteGenericInterface>, answer: ForwardAnswer): Reply<RouteGenericInterface> {
  for (const name of ['content-type', 'etag', 'retry-after', 'www-authenticate', 'allow']) {
    const value = answer.headers[name];
    if (value !== undefined) reply.header(name, value);
  }
  return reply.code(answer.status).send(answer.body);
}

/** Replies as the owner answered a forwarded one-timer add: its status, the headers that carry meaning, its body (JSON, serialized as the owner did). */
function relayOwnerAnswer(reply: Reply<RouteGenericInterface>, answer: OwnerAnswer): Reply<RouteGenericInterface> {
  if (answer.retryAfter !== undefined) reply.header('retry-after', answer.retryAfter);
  if (answer.wwwAuthenticate !== undefined) reply.header('www-authenticate', answer.wwwAuthenticate);
  return reply.code(answer.status).send(answer.body);
}

/** An owner's answer other than 200 to one partition's part of a fan-out. */
class OwnerRefused extends Error {
  readonly answer: ForwardAnswer;
  constructor(answer: ForwardAnswer) {
    super(`the partition's owner answered ${answer.status}`);
    this.answer = answer;
  }
}

const moving = (partition: number): FermataError =>
  new FermataError(errorCodes.partitionMoving, `partition ${partition} is moving between nodes (or its owner is out of reach): try again`);

export async function clusterFront(app: HttpServer, options: ClusterFrontOptions): Promise<void> {
  const { directory, clock } = options;
  const router = new ClusterRouter(directory);
  const forwarder = new Forwarder({ secret: options.secret, timeoutMs: options.forwardTimeoutMs ?? defaultForwardTimeoutMs });
  const forwardedAdds = new ForwardedAdds((address, request) => forwarder.send(address, request));
  app.addHook('onClose', (_app, done) => {
    forwarder.close();
    router.close();
    done();
  });
  // Compared as digests, so the comparison takes the same time whatever the length sent.
  const secretDigest = hash('sha256', options.secret, 'buffer');
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.headers[forwardedHeader] === undefined) return done();
    const given = request.headers[secretHeader];
    if (typeof given === 'string' && timingSafeEqual(hash('sha256', given, 'buffer'), secretDigest)) return done();
    done(new FermataError(errorCodes.unauthorized, `a forwarded request needs the cluster's secret in ${secretHeader}`));
  });
  const readBody = (_request: unknown, body: Buffer, done: (err: Error | null, body?: unknown) => void): void => done(null, body);
  app.addContentTypeParser(mediaTypes.ndjson, { parseAs: 'buffer', bodyLimit: ingestLimits.bodyBytesMax }, readBody);
  app.addContentTypeParser(mediaTypes.arrowStream, { parseAs: 'buffer', bodyLimit: ingestLimits.bodyBytesMax }, readBody);
  app.addContentTypeParser(forwardedAddsMediaType, { parseAs: 'buffer', bodyLimit: ingestLimits.bodyBytesMax }, readBody);

  const isForwarded = (request: { headers: Readonly<Record<string, unknown>> }): boolean => request.headers[forwardedHeader] !== undefined;
  const forwardOf = (request: { method: string; url: string; headers: ForwardRequest['headers'] }, body: Uint8Array | undefined): ForwardRequest =>
    body === undefined ? { method: request.method, path: request.url, headers: request.headers } : { method: request.method, path: request.url, headers: request.headers, body };

  /** The route of a partition for this request: a forwarded request is served here or not at all. */
  const routeFor = (partition: number, forwarded: boolean): PartitionRoute => {
    const route = router.route(partition);
    return forwarded && route.kind === 'remote' ? { kind: 'moving', partition } : route;
  };

  /** A one-timer add sent to its owner with the others of this turn (forwarded-adds.ts): the owner's answer to it. */
  const forwardAdd = (address: string, headers: ForwardRequest['headers'], body: unknown): Promise<OwnerAnswer> =>
    new Promise((resolve, reject) => forwardedAdds.add(address, headers, JSON.stringify(body), { answered: resolve, refused: reject }));

  /** Appends one part of a batch (an NDJSON body) in its partition, here or at its owner. */
  const admitPart: PartAdmitter = async (partition, body, forwarded, headers) => {
    const route = routeFor(partition, forwarded);
    if (route.kind === 'moving') throw moving(partition);
    if (route.kind === 'remote') {
      return { remote: await forwarder.send(route.address, { method: 'POST', path: '/v1/timers', headers: { ...headers, 'content-type': mediaTypes.ndjson, accept: 'application/json' }, body }) };
    }
    return { local: await admitNdjsonHere(route.engine, partition, body, clock.now(), traceHeadersOf(headers.traceparent, headers.tracestate)) };
  };

  app.post<{ Body: unknown }>('/v1/timers', async (request, reply) => {
    const forwarded = isForwarded(request);
    const mediaType = mediaTypeOf(request.headers['content-type']);
    if (mediaType === mediaTypes.json) {
      const spec = withTrace(specFromJsonTimer(request.body, clock.now()), traceHeadersOf(request.headers.traceparent, request.headers.tracestate));
      checkAddQueues(callerOf(request), [spec.queue ?? defaultQueue]);
      const partition = router.partitionForAdd(spec.key);
      if (partition === undefined) {
        // This node owns no partition: an unkeyed timer goes to one that does.
        const address = forwarded ? undefined : router.anyOwnerAddress();
        if (address === undefined) throw new FermataError(errorCodes.partitionMoving, 'no partition has an owner that can take this timer now: try again');
        return relayOwnerAnswer(reply, await forwardAdd(address, request.headers, request.body));
      }
      // The engine asked first: a partition owned here (most unkeyed adds) makes no route object.
      const engine = directory.engineOf(partition);
      if (engine === undefined) {
        const route = routeFor(partition, forwarded);
        if (route.kind !== 'remote') throw moving(partition);
        return relayOwnerAnswer(reply, await forwardAdd(route.address, request.headers, request.body));
      }
      let admitted;
      try {
        admitted = await router.coalescerOf(partition, engine).admitOne(spec);
      } catch (err) {
        throw inJsonTerms(err, undefined);
      }
      const answer = singleAddAnswer(clusterIdOf(partition, admitted.id), admitted.original, spec.fireAtMs, request.body);
      return reply.code(answer.status).send(answer.body);
    }
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    // Several one-timer adds another node forwarded in one request, each answered as alone (forwarded-adds.ts).
    if (mediaType === forwardedAddsMediaType && forwarded) {
      const logError = (err: unknown): void => request.log.error({ err }, 'unexpected error answering a request');
      const answers = await answerForwardedAdds(body, callerOf(request), traceHeadersOf(request.headers.traceparent, request.headers.tracestate), { router, clock, logError });
      return reply.code(200).type(mediaTypes.json).send(answers);
    }
    if (mediaType !== mediaTypes.ndjson && mediaType !== mediaTypes.arrowStream) {
      throw new HttpProblem(httpErrorCodes.unsupportedMediaType, `POST /v1/timers needs a Content-Type: ${mediaTypes.json}, ${mediaTypes.ndjson} or ${mediaTypes.arrowStream}`);
    }
    const now = clock.now();
    // A queue-limited token's rows are read for their queues first (ingest/auth/batch-queues.ts); others pay nothing.
    const caller = callerOf(request);
    if (caller.queues !== undefined) {
      if (mediaType === mediaTypes.ndjson) checkAddQueues(caller, batchFromNdjson(body, now).batch.queues);
      else checkArrowAddQueues(caller, body);
    }
    // Validated whole before any row is sent anywhere: a bad row refuses the batch, as on one node.
    let rowsOf: () => string[];
    let keys: (string | undefined)[];
    if (mediaType === mediaTypes.ndjson) {
      const parsed = ndjsonRows(body, now);
      rowsOf = () => parsed.rows;
      keys = parsed.keys;
    } else {
      if (body.length === 0) throw new FermataError(errorCodes.batchInvalid, 'the body is empty: send an Arrow IPC stream (schema, then record batches)', { column: '' });
      const batch = batchFromArrow(body, now, timerLimits.rowsPerBatchMax, 'client');
      validateBatch(batch, timerLimits, now);
      keys = [];
      for (let row = 0; row < batch.rows; row++) keys.push(utf8.decode(bytesAt(batch.keys, row)) || undefined);
      rowsOf = () => arrowRowsAsNdjson(batch);
    }
    const allUnkeyed = keys.every((key) => key === undefined);
    const unkeyedPartition = allUnkeyed ? router.partitionForBatch() : undefined;
    if (allUnkeyed && unkeyedPartition === undefined) {
      const address = forwarded ? undefined : router.anyOwnerAddress();
      if (address === undefined) throw new FermataError(errorCodes.partitionMoving, 'no partition has an owner that can take this batch now: try again');
      return relay(reply, await forwarder.send(address, forwardOf(request, body)));
    }
    const split = splitBatch(keys, router.partitions, unkeyedPartition, body);
    // A batch wholly in one partition owned here (every unkeyed one) is appended as it came, not
    // cut: an Arrow body is logged as it arrived, as on one node.
    const only = onePartitionOf(split.partitionOfRow);
    const route = only === undefined || split.derivedKeys !== undefined ? undefined : routeFor(only, forwarded);
    if (route?.kind === 'local') {
      const part =
        mediaType === mediaTypes.ndjson
          ? await admitNdjsonHere(route.engine, route.partition, body, now, traceHeadersOf(request.headers.traceparent, request.headers.tracestate))
          : await admitArrowHere(route.engine, route.partition, body);
      return reply.code(201).send({ accepted: part.ids.length, duplicates: part.duplicateRows.length, ids: part.ids, revisions: part.revisions, duplicate_rows: part.duplicateRows });
    }
    // An Arrow body's rows carry their trace in `headers`, as on one node: its NDJSON parts go without the request's.
    const partHeaders = mediaType === mediaTypes.ndjson ? request.headers : withoutTraceHeaders(request.headers);
    const answer = await admitParts(rowsOf(), split, (partition, part) => admitPart(partition, part, forwarded, partHeaders));
    return reply.code(answer.status).headers(answer.headers).send(answer.body);
  });

  /** The partition and engine id an id names, or 404 (as for an unknown id). */
  const partsOf = (id: string): { partition: number; engineId: string } => {
    const parts = clusterIdParts(id, router.partitions);
    if (parts === undefined) throw new HttpProblem(httpErrorCodes.notFound, `no timer ${id}`);
    return parts;
  };

  /** Serves a request on one timer here when its partition is owned here, else forwards it (or answers that it moves). */
  const onTimer =
    (handle: (engine: Engine, id: string, engineId: string, request: Request<OnTimer>, reply: Reply<OnTimer>) => Promise<unknown>) =>
    async (request: Request<OnTimer>, reply: Reply<OnTimer>): Promise<unknown> => {
      const { id } = request.params;
      const { partition, engineId } = partsOf(id);
      const route = routeFor(partition, isForwarded(request));
      if (route.kind === 'moving') throw moving(partition);
      if (route.kind === 'remote') {
        const body = request.body === undefined ? undefined : Buffer.from(JSON.stringify(request.body));
        return relay(reply, await forwarder.send(route.address, forwardOf(request, body)));
      }
      return handle(route.engine, id, engineId, request, reply);
    };

  app.get<OnTimer>(
    '/v1/timers/:id',
    onTimer(async (engine, id, engineId, _request, reply) => {
      const view = await engine.lookup(engineId);
      if (view === undefined) throw new HttpProblem(httpErrorCodes.notFound, `no timer ${id}`);
      reply.header('etag', `"${view.revision}"`);
      return { ...timerView.json(view), id };
    }),
  );

  app.delete<OnTimer>(
    '/v1/timers/:id',
    onTimer(async (engine, id, engineId, request) => {
      const outcome = await engine.cancel(engineId, parseIfMatch(request.headers['if-match']));
      if (outcome === 'cancelled') return { id, state: 'cancelled', revision: engine.get(engineId)?.revision ?? 1 };
      if (outcome === 'not-found') throw new HttpProblem(httpErrorCodes.notFound, `no timer ${id}`);
      if (outcome === 'revision-mismatch') {
        throw new HttpProblem(httpErrorCodes.revisionMismatch, revisionMismatchMessage(id, (await engine.lookup(engineId))?.revision, request.headers['if-match']));
      }
      throw new HttpProblem(httpErrorCodes.tooLate, `timer ${id} is ${engine.get(engineId)?.state ?? 'finished'}: too late to cancel`);
    }),
  );

  // A partition asked for one by one (fan-out.ts): here, or at its owner, whose 200 answer is the result.
  const call: PartitionCall = async <T,>(partition: number, local: (engine: Engine) => Promise<T>, request: ForwardRequest): Promise<T> => {
    const route = routeFor(partition, isForwarded(request));
    if (route.kind === 'moving') throw moving(partition);
    if (route.kind === 'local') return local(route.engine);
    const answer = await forwarder.send(route.address, request);
    if (answer.status !== 200) throw new OwnerRefused(answer);
    return JSON.parse(answer.body.toString('utf8')) as T;
  };
  const onlyPartition = (headers: Readonly<Record<string, string | string[] | undefined>>): number | undefined => {
    const named = headers[partitionHeader];
    if (headers[forwardedHeader] === undefined || typeof named !== 'string') return undefined;
    const partition = Number(named);
    if (!(Number.isInteger(partition) && partition >= 0 && partition < router.partitions)) throw new HttpProblem(httpErrorCodes.requestInvalid, `${partitionHeader} names no partition of this cluster`);
    return partition;
  };
  const exportArrow = clusterArrowExport({ routeFor: (partition, headers) => routeFor(partition, headers[forwardedHeader] !== undefined), open: (address, request) => forwarder.open(address, request), partitionHeader });
  fanOutRoutes(app, { partitions: router.partitions, call, onlyPartition, exportArrow });
  const onPartition: OnPartition = async (partition, request, reply, local) => {
    const route = routeFor(partition, isForwarded(request));
    if (route.kind === 'moving') throw moving(partition);
    if (route.kind === 'local') return local(route.engine);
    const body = request.body === undefined ? undefined : Buffer.from(JSON.stringify(request.body));
    return relay(reply, await forwarder.send(route.address, forwardOf(request, body)));
  };
  clusterScheduleRoutes(app, { partitions: router.partitions, onPartition, call, onlyPartition });
  // A one-timer JSON add on the raw HTTP/2 stream goes where this route's would; one another node
  // forwarded is the route's, which checks the cluster's secret and never forwards it again.
  options.fastSingleAdd?.((headers) => (headers[forwardedHeader] !== undefined ? undefined : new ClusterStreamAdmitter({ router, adds: forwardedAdds, headers, forwarded: false })));
  await app.register(timerStreamRoutes, {
    admitterFor: (headers) => new ClusterStreamAdmitter({ router, adds: forwardedAdds, headers, forwarded: headers[forwardedHeader] !== undefined }),
    clock,
  });
  // An owner's refusal of its part of a fan-out is the answer, as the owner gave it.
  app.setErrorHandler((err, _request, reply) => {
    if (err instanceof OwnerRefused) return relay(reply, err.answer);
    throw err;
  });

  app.patch<OnTimer>(
    '/v1/timers/:id',
    onTimer(async (engine, id, engineId, request, reply) => ({ ...timerView.json(await patchTimer(engine, engineId, id, request, reply)), id })),
  );

  app.post<OnTimer>(
    '/v1/dead/:id/retry',
    onTimer(async (engine, id, engineId) => {
      const outcome = await engine.redrive(engineId);
      if (outcome === 'redriven') return { id, state: 'pending' };
      if (outcome === 'not-found') throw new HttpProblem(httpErrorCodes.notFound, `no timer ${id}`);
      throw new HttpProblem(httpErrorCodes.notDead, `timer ${id} is ${engine.get(engineId)?.state ?? 'not dead'}: only dead timers are redriven`);
    }),
  );

  app.delete<OnTimer>(
    '/v1/dead/:id',
    onTimer(async (engine, id, engineId) => {
      const outcome = await engine.discardDead(engineId);
      if (outcome === 'discarded') return { id, state: 'discarded' };
      if (outcome === 'not-found') throw new HttpProblem(httpErrorCodes.notFound, `no timer ${id}`);
      throw new HttpProblem(httpErrorCodes.notDead, `timer ${id} is ${engine.get(engineId)?.state ?? 'not dead'}: only dead timers are discarded (DELETE /v1/timers/{id} cancels a pending one)`);
    }),
  );

  const series = clusterStatsRoutes(app, { directory, router, send: (address, request) => forwarder.send(address, request) });
  clusterQueueRoutes(app, { directory, router, send: (address, request) => forwarder.send(address, request), queues: options.queues, series });
}

/** Appends an NDJSON part in a partition owned here; the answer's ids are cluster ids. */
async function admitNdjsonHere(engine: Engine, partition: number, body: Uint8Array, nowMs: number, trace: TraceHeaders | undefined): Promise<PartAnswer> {
  const { batch, lineOfRow, delayRows } = batchFromNdjson(body, nowMs, trace);
  let admitted;
  try {
    admitted = await engine.admit(batch);
  } catch (err) {
    throw inJsonTerms(err, lineOfRow);
  }
  return partAnswerOf(admitted, partition, delayRows);
}

/** A request's headers without its trace context. */
function withoutTraceHeaders(headers: Readonly<Record<string, string | string[] | undefined>>): Record<string, string | string[] | undefined> {
  const { [traceparentHeader]: _traceparent, [tracestateHeader]: _tracestate, ...rest } = headers;
  return rest;
}

/** Appends a whole Arrow body in a partition owned here, as it came. */
async function admitArrowHere(engine: Engine, partition: number, body: Buffer): Promise<PartAnswer> {
  const admitted = await engine.admitArrow(body);
  return partAnswerOf(admitted, partition, admitted.duplicates > 0 && arrowGaveDelay(body));
}

function partAnswerOf(admitted: Admitted, partition: number, delayRows: DelayRows): PartAnswer {
  const ids: string[] = [];
  const revisions: number[] = [];
  for (let row = 0; row < admitted.rows; row++) {
    ids.push(clusterIdOf(partition, admitted.idOf(row)));
    revisions.push(admitted.duplicates > 0 ? admitted.revisionOf(row) : 1);
  }
  return { ids, revisions, duplicateRows: duplicateRowsJson(admitted, delayRows) };
}

/** The partition every row is in, or undefined when they span several. */
function onePartitionOf(partitionOfRow: Int32Array): number | undefined {
  const first = partitionOfRow[0];
  return first !== undefined && partitionOfRow.every((partition) => partition === first) ? first : undefined;
}
