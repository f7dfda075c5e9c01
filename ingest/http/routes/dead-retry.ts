// POST /v1/dead/retry: redrives every dead timer the dead list's filter names (a JSON body:
// {} for all, {"queue"} for one queue's), each by the engine's one-timer redrive, oldest first
// and at most deadRetryLimits.redrivenMax a request, and answers how many once all are durable.
// The list is read in one turn (its pages are synchronous), so it is one moment's. Main thread.
import assert from 'node:assert/strict';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { deadListLimits, deadRetryLimits } from '../route-limits.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';

export const deadRetriedSchema = {
  type: 'object',
  properties: { redriven: { type: 'integer' }, more: { type: 'boolean' } },
  required: ['redriven', 'more'],
  additionalProperties: false,
} as const;

/** The filter of POST /v1/dead/retry's body: GET /v1/dead's, without the paging. */
function deadFilterOf(body: unknown): { readonly queue?: string } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpProblem(httpErrorCodes.requestInvalid, 'the body must be a JSON object: {} redrives every dead timer, {"queue": NAME} one queue\'s');
  }
  const fields = body as Record<string, unknown>;
  for (const name of Object.keys(fields)) if (name !== 'queue') throw new HttpProblem(httpErrorCodes.requestInvalid, `${name} is not a filter of the dead list: give queue, or nothing for all`, name);
  const { queue } = fields;
  if (queue === undefined) return {};
  if (typeof queue !== 'string' || queue.length === 0) throw new HttpProblem(httpErrorCodes.requestInvalid, 'queue must be a queue\'s name', 'queue');
  return { queue };
}

export async function deadRetryRoutes(app: HttpServer, { engine }: RoutesOptions): Promise<void> {
  app.post<{ Body: unknown }>('/v1/dead/retry', { schema: { response: { 200: deadRetriedSchema } } }, async (request) => {
    const { queue } = deadFilterOf(request.body);
    // The list as it is now (pages are read in one turn), at most redrivenMax of it.
    const ids: string[] = [];
    let cursor: string | undefined;
    do {
      const page = engine.deadPage(Math.min(deadListLimits.max, deadRetryLimits.redrivenMax - ids.length), queue, cursor);
      assert.ok(page !== undefined, 'a page\'s own next_cursor is a cursor');
      for (const timer of page.dead) ids.push(timer.id);
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined && ids.length < deadRetryLimits.redrivenMax);
    // The redrives of a slice are logged together (the log commits them as a group); one redriven
    // or discarded meanwhile is not counted.
    let redriven = 0;
    for (let from = 0; from < ids.length; from += deadRetryLimits.redrivesAtOnce) {
      const outcomes = await Promise.all(ids.slice(from, from + deadRetryLimits.redrivesAtOnce).map((id) => engine.redrive(id)));
      for (const outcome of outcomes) if (outcome === 'redriven') redriven++;
    }
    return { redriven, more: cursor !== undefined };
  });
}
