// The OpenAPI paths of POST /v1/queues/{name}/pause and /resume (routes/queues.ts), which
// openapi.ts puts among its paths. Built once when the module loads; any thread.
import { httpErrorCodes } from '../error-map.ts';
import { errorResponse, jsonOf, logResponses, namedQueueSchema, queueNameParameter, ref } from './openapi-parts.ts';

function pauseOperation(operationId: string, summary: string, description: string): object {
  return {
    post: {
      operationId,
      summary,
      description,
      parameters: [queueNameParameter],
      responses: {
        '200': { description: 'The queue, with `paused` as it is now.', content: jsonOf(namedQueueSchema) },
        '401': ref('responses', 'Unauthorized'),
        '404': errorResponse('NOT_FOUND: no queue has this name (never configured nor named by a timer, or deleted).', [httpErrorCodes.notFound]),
        ...logResponses,
      },
    },
  };
}

export const queuePausePaths = {
  '/v1/queues/{name}/pause': pauseOperation(
    'pauseQueue',
    'Pause a queue',
    'Once durable, the queue delivers nothing: it still accepts timers, and its due timers (retrying ones too) stay pending, held, until a resume. Deliveries already handed out when the pause lands finish as they would have; a "pull" queue leases nothing while paused. Pausing a paused queue changes nothing. A PUT of its config keeps it paused; a delete forgets the pause.',
  ),
  '/v1/queues/{name}/resume': pauseOperation(
    'resumeQueue',
    'Resume a paused queue',
    'Once durable, the held timers go out, oldest first, late, within the queue\'s `rate_per_s` (its token bucket starts with one second\'s worth, not the backlog) and `max_concurrent`, or at the workers\' capacity without them. Resuming a queue that is not paused changes nothing.',
  ),
};
