// The OpenAPI description of an add's trace context headers (docs/api.md, "Trace context"),
// shared by POST /v1/timers and POST /v1/timers/stream. Data only, any thread.
import { traceparentHeader, tracestateHeader } from '../../../engine/trace-context.ts';

export const traceParameters = [
  {
    name: traceparentHeader,
    in: 'header',
    required: false,
    schema: { type: 'string', pattern: '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-.*)?$' },
    example: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    description:
      'W3C Trace Context. Kept in the headers of each timer the request adds (JSON and NDJSON bodies; not an Arrow body, whose rows carry theirs in `headers`) unless the timer names a `traceparent` in its own `headers`; each delivery attempt then sends `traceparent: 00-{the same trace-id}-{a new span id}-{the same flags}`, and a callback continues the trace. One that does not parse (or is repeated) is ignored, as the specification asks, with its `tracestate`: the timers get none.',
  },
  {
    name: tracestateHeader,
    in: 'header',
    required: false,
    schema: { type: 'string' },
    description: 'Kept and sent beside `traceparent` as it came; ignored without a `traceparent` that parses.',
  },
] as const;
