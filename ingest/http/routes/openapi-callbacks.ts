// The OpenAPI description of a callback's delivery (docs/api.md, "Callbacks"): what fermata POSTs
// to a timer's `callback` or `failure_callback` URL, as an OpenAPI 3.1 webhook. Data only, any thread.
import { callbackForHeader, callbackResponseBytesMax } from '../../../engine/callbacks.ts';
import { sizeText } from './openapi-parts.ts';

const nullableTime = { type: ['string', 'null'], format: 'date-time' } as const;

/** The outcome summary a follow-up timer delivers. */
const callbackSummary = {
  type: 'object',
  properties: {
    id: { type: 'string', description: 'The id of the timer whose outcome this is.' },
    state: { enum: ['delivered', 'dead'], description: '`delivered` for a `callback`, `dead` for a `failure_callback`.' },
    attempts: { type: 'integer', minimum: 1, description: 'Attempts made, the last one included.' },
    status: { type: ['integer', 'null'], description: 'The target\'s HTTP status at the last attempt; null when none came back.' },
    error: { type: ['string', 'null'], description: 'Beside a null `status`: why no answer came (`connection refused`, `timeout after 10000 ms`, …, as `last_error`); null otherwise.' },
    response_base64: { type: ['string', 'null'], contentEncoding: 'base64', description: `The first ${sizeText(callbackResponseBytesMax)} of the target's answer body at the last attempt; null when no answer came back.` },
    fire_at: { type: 'string', format: 'date-time', description: 'The timer\'s fire time.' },
    delivered_at: { ...nullableTime, description: 'When the delivery was recorded; null for a dead timer.' },
  },
  required: ['id', 'state', 'attempts', 'status', 'error', 'response_base64', 'fire_at', 'delivered_at'],
  additionalProperties: false,
} as const;

export const callbackWebhooks = {
  timerOutcome: {
    post: {
      operationId: 'timerOutcomeCallback',
      summary: 'A timer\'s outcome, POSTed to its callback or failure_callback',
      description:
        'Delivered as a timer of its own (the follow-up: same queue, signing, SSRF guard and retry policy; key `callback:{id}`; no callback of its own), with the headers of every delivery, `fermata-timer-id` being the follow-up\'s id, and in the timer\'s trace: its `traceparent` (a new span id each attempt) and `tracestate`, when it was added with them.',
      parameters: [{ name: callbackForHeader, in: 'header', required: true, schema: { type: 'string' }, description: 'The id of the timer whose outcome this is.' }],
      requestBody: { required: true, content: { 'application/json': { schema: callbackSummary } } },
      responses: { '2XX': { description: 'Received: the follow-up is delivered. Any other answer is retried under the queue\'s policy.' } },
    },
  },
} as const;
