// W3C Trace Context (https://www.w3.org/TR/trace-context/) for timers, so that a trace runs
// from the producer through fermata to the target. Pure functions, no state: called by the
// ingest routes on the main thread (an add's `traceparent` into its timers' headers), by the
// delivery workers (each attempt a child span) and by callbacks.ts (a follow-up keeps the trace).
//
//   add  traceparent: 00-{trace-id}-{producer span}-{flags}      kept in the timer's stored headers
//   each attempt      00-{trace-id}-{new random span id}-{flags}  as the target's parent
//
// A timer's trace is its stored `traceparent` header (the add request's, or one its own
// `headers` named): no record-format change. One that does not parse is dropped with its
// `tracestate` (the spec: a receiver that cannot parse it restarts the trace; fermata, which
// reports no spans of its own, then sends none), and a timer without one gets none.
import { randomBytes } from 'node:crypto';
import type { TimerSpec } from './batch/timer-batch.ts';

export const traceparentHeader = 'traceparent';
export const tracestateHeader = 'tracestate';

/** A parsed traceparent: lower-case hex, neither id all zeros. */
export interface Traceparent {
  readonly traceId: string;
  readonly parentId: string;
  readonly flags: string;
}

/** An add's trace headers, applied to each timer it adds that names none of its own. */
export interface TraceHeaders {
  readonly traceparent: string;
  readonly tracestate?: string;
}

// version 00 is exactly this; a later version may add fields after the flags, each after a dash (spec §3.2.4).
const version00 = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const laterVersion = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-|$)/;
const zeroTraceId = '0'.repeat(32);
const zeroSpanId = '0'.repeat(16);

/** A traceparent header's value (surrounding spaces allowed) → its fields; undefined when it does not parse. */
export function parseTraceparent(value: string): Traceparent | undefined {
  const text = value.trim();
  let traceId: string | undefined;
  let parentId: string | undefined;
  let flags: string | undefined;
  const v0 = version00.exec(text);
  if (v0 !== null) [, traceId, parentId, flags] = v0;
  else {
    const later = laterVersion.exec(text);
    // "ff" is no version, and 00 has no trailing fields.
    if (later === null || later[1] === 'ff' || later[1] === '00') return undefined;
    [, , traceId, parentId, flags] = later;
  }
  if (traceId === undefined || parentId === undefined || flags === undefined) return undefined;
  if (traceId === zeroTraceId || parentId === zeroSpanId) return undefined;
  return { traceId, parentId, flags };
}

/** A span id: 8 random bytes in lower-case hex, never all zeros. */
export function newSpanId(): string {
  for (;;) {
    const id = randomBytes(8).toString('hex');
    if (id !== zeroSpanId) return id;
  }
}

/** The version-00 traceparent naming `spanId` as the parent, in `parent`'s trace with its flags. */
export function formatTraceparent(parent: Traceparent, spanId: string): string {
  return `00-${parent.traceId}-${spanId}-${parent.flags}`;
}

/**
 * An HTTP request's (or gRPC call's) trace headers; undefined when it has no traceparent or one
 * that does not parse (then its tracestate is not read either). Repeated headers arrive joined
 * by commas and so do not parse, as the spec wants of a repeated traceparent.
 */
export function traceHeadersOf(traceparent: string | readonly string[] | undefined, tracestate: string | readonly string[] | undefined): TraceHeaders | undefined {
  if (typeof traceparent !== 'string' || parseTraceparent(traceparent) === undefined) return undefined;
  const state = typeof tracestate === 'string' ? tracestate.trim() : Array.isArray(tracestate) ? tracestate.join(',') : '';
  return state === '' ? { traceparent: traceparent.trim() } : { traceparent: traceparent.trim(), tracestate: state };
}

/** Whether a header set names a traceparent (header names are case-insensitive). */
function namesTraceparent(headers: Readonly<Record<string, string>>): boolean {
  for (const name in headers) if (name.toLowerCase() === traceparentHeader) return true;
  return false;
}

/** `spec` with the add's trace in its headers, unless it names a traceparent of its own (that one counts as the add's). */
export function withTrace(spec: TimerSpec, trace: TraceHeaders | undefined): TimerSpec {
  if (trace === undefined) return spec;
  if (spec.headers !== undefined && namesTraceparent(spec.headers)) return spec;
  return { ...spec, headers: { ...spec.headers, ...trace } };
}

/**
 * An attempt's delivery headers (names lower-case, as the worker merges them): a traceparent
 * that parses becomes a child of itself with a new span id; one that does not is dropped with
 * its tracestate. Headers without a traceparent are left as they are.
 */
export function traceAttempt(headers: Record<string, string>): void {
  const stored = headers[traceparentHeader];
  if (stored === undefined) return;
  const parent = parseTraceparent(stored);
  if (parent === undefined) {
    delete headers[traceparentHeader];
    delete headers[tracestateHeader];
    return;
  }
  headers[traceparentHeader] = formatTraceparent(parent, newSpanId());
}

/** The trace headers in a timer's stored headers (any case), for a follow-up that continues its trace; undefined: none, or one that does not parse. */
export function storedTraceOf(headers: Readonly<Record<string, string>>): TraceHeaders | undefined {
  let traceparent: string | undefined;
  let tracestate: string | undefined;
  for (const name in headers) {
    const lower = name.toLowerCase();
    if (lower === traceparentHeader) traceparent = headers[name];
    else if (lower === tracestateHeader) tracestate = headers[name];
  }
  return traceHeadersOf(traceparent, tracestate);
}
