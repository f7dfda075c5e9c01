// W3C Trace Context for timers (engine/trace-context.ts): what parses and what is dropped (the
// spec's examples and its rules for versions, zero ids and case), an attempt's child keeping the
// trace id and flags under a new span id each time, an add's trace given only to timers without
// their own, and a follow-up's trace read from stored headers in any case.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseTraceparent, storedTraceOf, traceAttempt, traceHeadersOf, withTrace } from '../../engine/trace-context.ts';

const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
const parentId = '00f067aa0ba902b7';
const sampled = `00-${traceId}-${parentId}-01`;

describe('parseTraceparent', () => {
  test("the spec's example parses into its fields, with spaces around it", () => {
    assert.deepEqual(parseTraceparent(` ${sampled}\t`), { traceId, parentId, flags: '01' });
  });

  test('a later version parses by its first four fields, with or without more after a dash', () => {
    assert.deepEqual(parseTraceparent(`cc-${traceId}-${parentId}-09-what-the-future-brings`), { traceId, parentId, flags: '09' });
    assert.deepEqual(parseTraceparent(`01-${traceId}-${parentId}-00`), { traceId, parentId, flags: '00' });
  });

  for (const [why, value] of [
    ['version ff', `ff-${traceId}-${parentId}-01`],
    ['version 00 with a trailing field', `${sampled}-extra`],
    ['a later version run on into the flags', `cc-${traceId}-${parentId}-01x`],
    ['an all-zero trace id', `00-${'0'.repeat(32)}-${parentId}-01`],
    ['an all-zero parent id', `00-${traceId}-${'0'.repeat(16)}-01`],
    ['upper-case hex', sampled.toUpperCase()],
    ['a short trace id', `00-${traceId.slice(1)}-${parentId}-01`],
    ['two joined by a comma (a repeated header)', `${sampled}, ${sampled}`],
    ['nothing', ''],
  ] as const) {
    test(`${why} does not parse`, () => assert.equal(parseTraceparent(value), undefined));
  }
});

describe('traceAttempt', () => {
  test('each attempt is a child: the same trace id and flags, a new span id, never the parent', () => {
    const spans = new Set<string>();
    for (let attempt = 0; attempt < 50; attempt++) {
      const headers: Record<string, string> = { traceparent: `00-${traceId}-${parentId}-03`, tracestate: 'congo=t61rcWkgMzE' };
      traceAttempt(headers);
      const child = parseTraceparent(headers.traceparent ?? '');
      assert.ok(child !== undefined, headers.traceparent);
      assert.deepEqual([child.traceId, child.flags, headers.tracestate], [traceId, '03', 'congo=t61rcWkgMzE']);
      assert.notEqual(child.parentId, parentId);
      spans.add(child.parentId);
    }
    assert.equal(spans.size, 50);
  });

  test('a later version is sent as version 00', () => {
    const headers: Record<string, string> = { traceparent: `cc-${traceId}-${parentId}-01-more` };
    traceAttempt(headers);
    assert.match(headers.traceparent ?? '', new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
  });

  test('a traceparent that does not parse is dropped with its tracestate; other headers stay', () => {
    const headers: Record<string, string> = { traceparent: 'not-a-trace', tracestate: 'a=b', 'x-kept': '1' };
    traceAttempt(headers);
    assert.deepEqual(headers, { 'x-kept': '1' });
  });

  test('headers without a traceparent get none', () => {
    const headers: Record<string, string> = { 'x-kept': '1' };
    traceAttempt(headers);
    assert.deepEqual(headers, { 'x-kept': '1' });
  });
});

describe("an add's trace", () => {
  const trace = traceHeadersOf(sampled, 'congo=t61rcWkgMzE');

  test('is read from a request only when its traceparent parses', () => {
    assert.deepEqual(trace, { traceparent: sampled, tracestate: 'congo=t61rcWkgMzE' });
    assert.deepEqual(traceHeadersOf(sampled, undefined), { traceparent: sampled });
    assert.equal(traceHeadersOf('00-bad', 'congo=t61rcWkgMzE'), undefined);
    assert.equal(traceHeadersOf(undefined, 'congo=t61rcWkgMzE'), undefined);
  });

  test("goes into a timer's headers beside its own, unless the timer names a traceparent (any case)", () => {
    const spec = { fireAtMs: 1, target: 'http://127.0.0.1/x' };
    assert.deepEqual(withTrace(spec, trace).headers, trace);
    assert.deepEqual(withTrace({ ...spec, headers: { 'x-a': '1' } }, trace).headers, { 'x-a': '1', ...trace });
    const own = { ...spec, headers: { TraceParent: `00-${traceId}-${'1'.repeat(16)}-00` } };
    assert.equal(withTrace(own, trace), own);
    assert.equal(withTrace(spec, undefined), spec);
  });

  test("a follow-up reads it from the stored headers in any case, and not one that does not parse", () => {
    assert.deepEqual(storedTraceOf({ 'X-A': '1', TRACEPARENT: sampled, TraceState: 'a=b' }), { traceparent: sampled, tracestate: 'a=b' });
    assert.equal(storedTraceOf({ traceparent: 'nope', tracestate: 'a=b' }), undefined);
    assert.equal(storedTraceOf({ 'x-a': '1' }), undefined);
  });
});
