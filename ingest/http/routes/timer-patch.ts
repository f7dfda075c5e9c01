// PATCH /v1/timers/{id}: reschedule a pending or retrying timer (engine/reschedule.ts) and answer
// its new view once the RESCHEDULE record is durable. Main thread. A thin adapter: the body's
// fields are read by the add path's own JSON reader (body/json-batch.ts) and the engine checks
// the patched timer with admit()'s rules, so a patched field is exactly as valid as an added one.
//
//   PATCH application/json {fire_at | delay_ms, payload | payload_base64, headers, target, queue,
//                           callback, failure_callback (a URL, or null: none)}
//     If-Match: "3" | "2", "3" | *   (strong tags of revisions; W/ never matches)
//   → 200 the timer view (revision + 1), ETag "<revision>"
//   | 400 BATCH_INVALID naming the field (unknown, `key`, none, both forms of one) | 400 REQUEST_INVALID (If-Match)
//   | 404 NOT_FOUND | 409 TIMER_NOT_PENDING | 412 REVISION_MISMATCH
import type { IncomingHttpHeaders } from 'node:http';
import type { Engine, TimerPatch } from '../../../engine/engine.ts';
import type { TimerView } from '../../../engine/types.ts';
import { type RevisionCondition } from '../../../engine/reschedule.ts';
import { errorCodes, FermataError } from '../../../engine/errors.ts';
import { inJsonTerms, specFromJsonTimer } from '../body/json-batch.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { timerView } from '../timer-views.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';
import { type IdParams, idParamsSchema } from './id-params.ts';

/** The fields a PATCH may set. */
export const patchFields = ['fire_at', 'delay_ms', 'payload', 'payload_base64', 'headers', 'target', 'queue', 'callback', 'failure_callback'] as const;
const knownFields: ReadonlySet<string> = new Set(patchFields);
/** The fields whose null removes them (a timer may have none). */
const removableFields: ReadonlySet<string> = new Set(['callback', 'failure_callback']);

/** Revisions are u32 counts from 1: an entity tag that is not one names no revision of any timer. */
const revisionTag = /^[1-9]\d{0,9}$/;
/** One entity tag of a list (RFC 9110 §8.8.3: [W/] DQUOTE *etagc DQUOTE), with the comma or end after it. */
const entityTag = /[ \t]*(W\/)?"([\x21\x23-\x7e\x80-\xff]*)"[ \t]*(?:,|$)/y;

/**
 * If-Match as HTTP defines it: `*`, or a list of entity tags. A weak tag never matches (a strong
 * comparison); a strong one must be a revision. Undefined: no header, no condition.
 */
/** The 412's message: what the timer is at, and why a tag the client sent did not name it. */
export function revisionMismatchMessage(id: string, revision: number | undefined, header: string | undefined): string {
  const weak = header !== undefined && /(^|,)\s*W\//.test(header) ? ' (a weak tag, W/"…", never matches: send the strong tag ETag gives)' : '';
  return `timer ${id} is at revision ${revision}, which If-Match does not name${weak}: read it again (GET) and decide`;
}

export function parseIfMatch(header: string | undefined): RevisionCondition {
  if (header === undefined) return undefined;
  const text = header.trim();
  if (text === '*') return '*';
  const refuse = (why: string): HttpProblem =>
    new HttpProblem(httpErrorCodes.requestInvalid, `If-Match ${JSON.stringify(header)} ${why}: send "*" or strong entity tags of revisions, such as If-Match: "3"`);
  if (text === '') throw refuse('is empty');
  const revisions: number[] = [];
  entityTag.lastIndex = 0;
  while (entityTag.lastIndex < text.length) {
    const at = entityTag.lastIndex;
    const match = entityTag.exec(text);
    if (match === null || match.index !== at) throw refuse('is not a list of entity tags');
    const [, weak, value = ''] = match;
    if (!revisionTag.test(value)) throw refuse(`names ${JSON.stringify(value)}, which is not a revision`);
    if (weak === undefined) revisions.push(Number(value));
  }
  return revisions;
}

const refuse = (message: string, field: string): FermataError => new FermataError(errorCodes.batchInvalid, message, { field });
const given = (fields: Record<string, unknown>, name: string): boolean => fields[name] !== undefined;

/** The body's fields checked as a PATCH's: an object, only patchable fields, at least one, none null but a callback. */
function patchBody(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw refuse('a PATCH body must be a JSON object of the fields to change', '');
  const fields = body as Record<string, unknown>;
  const names = Object.keys(fields);
  for (const name of names) {
    if (name === 'key') throw refuse('key cannot be changed: it names the timer (add a new timer for a new key)', 'key');
    if (!knownFields.has(name)) throw refuse(`unknown field ${JSON.stringify(name)} (a PATCH takes: ${patchFields.join(', ')})`, name);
    if (fields[name] === null && !removableFields.has(name)) throw refuse(`${name} must not be null (leave it out to keep it)`, name);
  }
  if (names.length === 0) throw refuse(`a PATCH needs at least one of ${patchFields.join(', ')}`, '');
  return fields;
}

/** A PATCH body → the change it asks for, checked (fields as patchBody says, values as an add's); `nowMs` anchors delay_ms. The cluster front uses it too. */
function patchFromBody(body: unknown, nowMs: number): TimerPatch {
  const fields = patchBody(body);
  // Read by the add path's JSON reader (types, RFC 3339, base64, one of each pair); the fields
  // an add requires and the PATCH leaves out get placeholders that are not kept. The engine
  // checks the timer as changed by admit()'s rules.
  const fireGiven = given(fields, 'fire_at') || given(fields, 'delay_ms');
  // A null callback (removal) is not a URL for the reader to check.
  const { callback, failure_callback: failureCallback, ...rest } = fields;
  const urls = { ...(callback === null ? {} : { callback }), ...(failureCallback === null ? {} : { failure_callback: failureCallback }) };
  const spec = specFromJsonTimer({ ...rest, ...urls, target: fields.target ?? '', ...(fireGiven ? {} : { delay_ms: 0 }) }, nowMs);
  const patch: { -readonly [K in keyof TimerPatch]: TimerPatch[K] } = {};
  if (fireGiven) patch.fireAtMs = spec.fireAtMs;
  if (given(fields, 'target')) patch.target = spec.target;
  if (given(fields, 'queue')) patch.queue = spec.queue ?? '';
  if (given(fields, 'payload') || given(fields, 'payload_base64')) patch.payload = spec.payload ?? '';
  if (given(fields, 'headers')) patch.headers = spec.headers ?? {};
  if (given(fields, 'callback')) patch.callback = callback === null ? null : (spec.callback ?? null);
  if (given(fields, 'failure_callback')) patch.failureCallback = failureCallback === null ? null : (spec.failureCallback ?? null);
  return patch;
}

/**
 * A PATCH of timer `engineId` on `engine`, decided as the route answers it: the new view (its
 * ETag set on `reply`), or the HttpProblem that says why not. `id` is the id the client named
 * (in cluster mode its cluster id, shown in the messages).
 */
export async function patchTimer(
  engine: Engine,
  engineId: string,
  id: string,
  request: { readonly headers: IncomingHttpHeaders; readonly body: unknown },
  reply: { header(name: string, value: string): unknown },
): Promise<TimerView> {
  const header = request.headers['if-match'];
  const view = await rescheduleTimer(engine, engineId, id, patchFromBody(request.body, engine.clock.now()), parseIfMatch(header), (revision) => revisionMismatchMessage(id, revision, header));
  reply.header('etag', `"${view.revision}"`);
  return view;
}

/**
 * `patch` applied to timer `engineId` if `condition` holds, whatever carried it (this route, the
 * gRPC API's RescheduleTimer): the new view, or the HttpProblem that says why not; `mismatch`
 * words a lost compare-and-set in the caller's terms, given the revision the timer is at.
 */
export async function rescheduleTimer(engine: Engine, engineId: string, id: string, patch: TimerPatch, condition: RevisionCondition, mismatch: (revision: number) => string): Promise<TimerView> {
  let outcome;
  try {
    outcome = await engine.reschedule(engineId, patch, condition);
  } catch (err) {
    throw inJsonTerms(err, undefined);
  }
  switch (outcome.outcome) {
    case 'rescheduled':
      return outcome.view;
    case 'not-found':
      throw new HttpProblem(httpErrorCodes.notFound, `no timer ${id}`);
    case 'revision-mismatch':
      throw new HttpProblem(httpErrorCodes.revisionMismatch, mismatch(outcome.revision));
    case 'not-pending':
      throw new HttpProblem(httpErrorCodes.timerNotPending, `timer ${id} is ${outcome.state}: only pending and retrying timers can be changed`);
  }
}

export async function timerPatchRoutes(app: HttpServer, { engine }: RoutesOptions): Promise<void> {
  app.patch<{ Params: IdParams; Body: unknown }>('/v1/timers/:id', { schema: { params: idParamsSchema, response: { 200: timerView.schema } } }, async (request, reply) =>
    timerView.json(await patchTimer(engine, request.params.id, request.params.id, request, reply)),
  );
}
