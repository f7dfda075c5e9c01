// A gRPC call's trace context: metadata `traceparent` (and `tracestate`) read as the HTTP add
// routes read the headers (engine/trace-context.ts), for AddTimer, AddTimers' `timers` and each
// request of StreamAddTimers. Main thread.
import type { Metadata } from '@grpc/grpc-js';
import { type TraceHeaders, traceHeadersOf, traceparentHeader, tracestateHeader } from '../../engine/trace-context.ts';

/** One text value of a metadata key; undefined when it is absent, binary or repeated (a repeated traceparent is invalid). */
function onlyValue(metadata: Metadata, key: string): string | undefined {
  const values = metadata.get(key);
  return values.length === 1 && typeof values[0] === 'string' ? values[0] : undefined;
}

/** The call's trace headers; undefined without a traceparent that parses. */
export function traceOfMetadata(metadata: Metadata): TraceHeaders | undefined {
  // Repeated tracestate values join as HTTP joins repeated headers.
  const state = metadata.get(tracestateHeader).filter((value): value is string => typeof value === 'string');
  return traceHeadersOf(onlyValue(metadata, traceparentHeader), state.length === 0 ? undefined : state.join(','));
}
