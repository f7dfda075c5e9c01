// /v1/timers: add (JSON, NDJSON, Arrow IPC), look up, cancel. A thin adapter: bytes → TimerBatch
// → engine.admit/admitArrow, and every 2xx is sent only after the engine says the batch is
// durable. The NDJSON and Arrow parsers hand the body over whole as a Buffer (Arrow's bytes
// are logged as they arrived); they are registered in this plugin's scope only. Single JSON
// timers go through the server's AdmitCoalescer: those read in one event-loop turn share one
// WAL record. Over HTTP/2, a plain one-timer JSON add is answered before it reaches fastify
// (h2-single-add.ts), with the same answer (single-add.ts) and error shape; this route serves
// the rest (HTTP/1.1, the TLS port, a refused token, a declared length over the limit).
//
//   POST application/json               one timer      → 201 {id, fire_at, revision:1, duplicate:false}
//                                                      | 200 {id, fire_at, revision, duplicate:true, state, differs}
//   POST application/x-ndjson           one a line     → 201 {accepted, duplicates, ids, revisions, duplicate_rows}
//   POST application/vnd.apache.arrow.stream           → 201 {accepted, duplicates, ids, revisions, duplicate_rows}
//                                                        (either, with Accept: Arrow → an Arrow stream)
//
// `accepted` counts every row of the batch (each is now durable: new, or the original its key
// names); `duplicates` says how many of those were already known; `ids` is every row's id in
// input order; `duplicate_rows` the duplicates, in order: {row, state, differs} (the original's
// state, and the fields the row differs from it in: ingest/duplicate-answers.ts). The Arrow
// answer has a row per input row: `id` (Utf8), `duplicate` (Bool), `state` (Utf8),
// `differs` (List<Utf8>), the last two null for a new row, and `revision` (Uint32). `revisions`
// is every row's timer's revision (1 for a new row, the original's now for a duplicate).
// GET answers the timer view with an ETag of its revision; DELETE the revision it kept.
// A JSON or NDJSON add's `traceparent` (and `tracestate`) header goes into the headers of each
// timer it adds that names none of its own (engine/trace-context.ts); an Arrow body is logged
// as it arrived, so its rows carry theirs in their `headers` column.
import { checkAddQueues, checkArrowAddQueues } from '../../auth/batch-queues.ts';
import type { AdmitCoalescer, AdmittedOne } from '../../../engine/admit-coalescer.ts';
import { defaultQueue } from '../../../engine/batch/timer-batch.ts';
import type { Admitted } from '../../../engine/engine.ts';
import { errorCodes, FermataError } from '../../../engine/errors.ts';
import { ingestLimits } from '../../../engine/limits.ts';
import { admittedToArrow } from '../../admitted-arrow.ts';
import { arrowGaveDelay, type DelayRows, duplicateRowsJson } from '../../duplicate-answers.ts';
import { BodyBuffers, pooledBodyParser } from '../body/body-buffers.ts';
import { batchFromNdjson, inJsonTerms, specFromJsonTimer } from '../body/json-batch.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { mediaTypeOf, mediaTypes } from '../media-types.ts';
import { newRowsAnswer } from '../batch-answer.ts';
import { singleAddAnswer } from '../single-add.ts';
import { cancelTimer } from '../timer-cancel.ts';
import { timerView } from '../timer-views.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';
import { callerOf } from '../listen/bearer-auth.ts';
import { type IdParams, idParamsSchema } from './id-params.ts';
import { traceHeadersOf, withTrace } from '../../../engine/trace-context.ts';
import { parseIfMatch, revisionMismatchMessage } from './timer-patch.ts';
import { timerStreamRoutes } from './timer-stream.ts';

const cancelledSchema = {
  type: 'object',
  properties: { id: { type: 'string' }, state: { type: 'string' }, revision: { type: 'integer', minimum: 1 } },
  required: ['id', 'state', 'revision'],
  additionalProperties: false,
} as const;

const wantsArrow = (accept: string | undefined): boolean => accept !== undefined && accept.toLowerCase().includes(mediaTypes.arrowStream);

const emptyBody = Buffer.alloc(0);
/** What fastify gives an object it serialises, for the answers written as bytes. */
const jsonType = 'application/json; charset=utf-8';

/** Every row's id, in input order (a duplicate's is its original's). */
function idsOf(admitted: Admitted): string[] {
  const ids = new Array<string>(admitted.rows);
  for (let row = 0; row < admitted.rows; row++) ids[row] = admitted.idOf(row);
  return ids;
}

/** Every row's timer's revision, in input order (1 for a new row). */
function revisionsOf(admitted: Admitted): number[] {
  const revisions = new Array<number>(admitted.rows).fill(1);
  for (let row = 0; admitted.duplicates > 0 && row < admitted.rows; row++) revisions[row] = admitted.revisionOf(row);
  return revisions;
}

/** Body buffers kept for reuse: a few, each up to a 10,000-row Arrow batch's size class and more. */
const bodyBufferLimits = { pooledBytesMax: 8 * 1024 * 1024, freeMax: 4 } as const;


export interface TimersRoutesOptions extends RoutesOptions {
  /** Single adds read in one turn share a record: this route's, the stream route's and the HTTP/2 fast path's (h2-single-add.ts). */
  readonly coalescer: AdmitCoalescer;
}

export async function timersRoutes(app: HttpServer, { engine, coalescer }: TimersRoutesOptions): Promise<void> {
  // NDJSON and Arrow bodies are read whole into buffers used again once the request is answered.
  const bodies = new BodyBuffers(bodyBufferLimits);
  const readBody = pooledBodyParser(bodies, ingestLimits.bodyBytesMax);
  app.addContentTypeParser(mediaTypes.ndjson, { bodyLimit: ingestLimits.bodyBytesMax }, readBody);
  app.addContentTypeParser(mediaTypes.arrowStream, { bodyLimit: ingestLimits.bodyBytesMax }, readBody);
  // POST /v1/timers/stream: its own scope, where NDJSON is read line by line instead of whole.
  await app.register(timerStreamRoutes, { admitterFor: () => coalescer, clock: engine.clock });

  app.post<{ Body: unknown }>('/v1/timers', async (request, reply) => {
    const mediaType = mediaTypeOf(request.headers['content-type']);
    if (mediaType === mediaTypes.json) {
      const spec = withTrace(specFromJsonTimer(request.body, engine.clock.now()), traceHeadersOf(request.headers.traceparent, request.headers.tracestate));
      checkAddQueues(callerOf(request), [spec.queue ?? defaultQueue]);
      let admitted: AdmittedOne;
      try {
        admitted = await coalescer.admitOne(spec);
      } catch (err) {
        throw inJsonTerms(err, undefined);
      }
      const answer = singleAddAnswer(admitted.id, admitted.original, spec.fireAtMs, request.body);
      return reply.code(answer.status).send(answer.body);
    }
    // The NDJSON and Arrow parsers deliver a Buffer; an empty body is one of length 0.
    const body = Buffer.isBuffer(request.body) ? request.body : emptyBody;
    try {
      let admitted: Admitted;
      let delayRows: DelayRows;
      if (mediaType === mediaTypes.ndjson) {
        const { batch, lineOfRow, delayRows: delays } = batchFromNdjson(body, engine.clock.now(), traceHeadersOf(request.headers.traceparent, request.headers.tracestate));
        delayRows = delays;
        checkAddQueues(callerOf(request), batch.queues);
        try {
          admitted = await engine.admit(batch);
        } catch (err) {
          throw inJsonTerms(err, lineOfRow);
        }
      } else if (mediaType === mediaTypes.arrowStream) {
        if (body.length === 0) throw new FermataError(errorCodes.batchInvalid, 'the body is empty: send an Arrow IPC stream (schema, then record batches)', { column: '' });
        checkArrowAddQueues(callerOf(request), body);
        admitted = await engine.admitArrow(body);
        delayRows = admitted.duplicates > 0 && arrowGaveDelay(body);
      } else {
        // Types without a parser never get here (fastify answers 415); this is a body-less request without one.
        throw new HttpProblem(
          httpErrorCodes.unsupportedMediaType,
          `POST /v1/timers needs a Content-Type: ${mediaTypes.json}, ${mediaTypes.ndjson} or ${mediaTypes.arrowStream}`,
        );
      }
      if (wantsArrow(request.headers.accept)) {
        const ipc = admittedToArrow(admitted, delayRows);
        return reply.code(201).type(mediaTypes.arrowStream).send(Buffer.from(ipc.buffer, ipc.byteOffset, ipc.byteLength));
      }
      if (admitted.duplicates === 0) return reply.code(201).type(jsonType).send(newRowsAnswer(admitted));
      return reply
        .code(201)
        .send({ accepted: admitted.rows, duplicates: admitted.duplicates, ids: idsOf(admitted), revisions: revisionsOf(admitted), duplicate_rows: duplicateRowsJson(admitted, delayRows) });
    } finally {
      // The batch was copied into the store, the log wrote the body (or refused it), and the
      // answer holds neither: the body's buffer can take the next request's.
      bodies.release(body);
    }
  });

  app.get<{ Params: IdParams }>('/v1/timers/:id', { schema: { params: idParamsSchema, response: { 200: timerView.schema } } }, async (request, reply) => {
    // A spilled timer (due past the horizon) is read from its bucket on disk.
    const view = await engine.lookup(request.params.id);
    if (view === undefined) throw new HttpProblem(httpErrorCodes.notFound, `no timer ${request.params.id}`);
    // A strong tag of the revision, for PATCH's If-Match (routes/timer-patch.ts).
    reply.header('etag', `"${view.revision}"`);
    return timerView.json(view);
  });

  app.delete<{ Params: IdParams }>('/v1/timers/:id', { schema: { params: idParamsSchema, response: { 200: cancelledSchema } } }, async (request) => {
    const { id } = request.params;
    // If-Match makes the cancel conditional on the revision, as it makes a PATCH (timer-patch.ts).
    const header = request.headers['if-match'];
    return cancelTimer(engine, id, parseIfMatch(header), (revision) => revisionMismatchMessage(id, revision, header));
  });
}
