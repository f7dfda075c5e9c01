// `fermata bench`: load against any running fermata, from this process (loadgen/load-generator.ts:
// HTTP/2, a few sessions, many streams; closed loop, or open loop with --rate; --mode stream:
// single adds as lines of long POST /v1/timers/stream requests, loadgen/stream-load.ts). With --sink it
// also starts a loopback HTTP/2 target (loadgen/sink.ts), points every timer at it, waits
// (bounded) for the deliveries after the add phase and reports fire lateness.
//
// Prints a summary for people, or with --json one figure a line in the shape of
// loadgen/report.ts (`{"suite":"bench","name":…,"value":…,"unit":…}`, a `bench.meta` line first).
// Exit 0 when the run happened (errors are figures, not failures), 1 when it could not run or
// no add was acknowledged, 2 on a usage error (the message names the flag).
import { parseArgs } from 'node:util';
import type { Histogram } from 'hdr-histogram-js';
import { timerLimits } from '../engine/limits.ts';
import { type LoadResult, runLoad } from '../loadgen/load-generator.ts';
import { runStreamLoad } from '../loadgen/stream-load.ts';
import { type Fact, type Figure, metaLine, roundTo, toJsonLines } from '../loadgen/report.ts';
import { awaitTimers, type SinkWait, startSink } from '../loadgen/sink.ts';
import { type BodyMode, bodyModes, buildBodies, type FireTimes, poolVariants } from '../loadgen/timer-bodies.ts';
import { parseDurationMs } from './duration.ts';

const defaults = {
  url: 'http://127.0.0.1:7070',
  mode: 'json',
  concurrency: 64,
  duration: '10s',
  batchRows: 1000,
  payloadBytes: 128,
  spread: '1h..30d',
  // A reserved name (RFC 2606) that never resolves: timers a run leaves behind fail their
  // deliveries instead of reaching someone's server.
  target: 'https://example.invalid/fermata-bench',
  wait: '60s',
} as const;

/** Streams one HTTP/2 session carries before --connections defaults to more sessions (fermata advertises 256). */
const streamsPerConnection = 256;
/** Answers to requests already sent are waited for this long after the run's end. */
const drainTimeoutMs = 30_000;

/** What --mode takes: the body forms, and single adds on add streams. */
type BenchMode = BodyMode | 'stream';
const benchModes: readonly BenchMode[] = [...bodyModes, 'stream'];

export const benchUsage = `Usage: fermata bench [--url URL] [--token TOKEN] [--mode json|ndjson|arrow|stream]
                    [--concurrency N] [--connections N] [--rate R] [--duration D]
                    [--batch-rows N] [--payload-bytes N] [--spread D..D]
                    [--target URL | --sink [--wait D]] [--json]

Adds timers to a running fermata over HTTP/2 and reports the achieved rate, acknowledgement
latency percentiles and errors by status.

  --url URL           the fermata to load (default ${defaults.url}); https:// trusts the
                      system CAs and NODE_EXTRA_CA_CERTS
  --token TOKEN       bearer token, when the server asks for one
  --mode M            json: one timer a request; ndjson or arrow: --batch-rows timers a
                      request; stream: one timer a line of a long POST /v1/timers/stream
                      request, each answered once durable (default ${defaults.mode})
  --concurrency N     requests in flight at most (stream: timers in flight) (default ${defaults.concurrency})
  --connections N     HTTP/2 sessions they are spread over, one add stream on each in stream
                      mode (default: one per ${streamsPerConnection} in flight)
  --rate R            open loop: R requests a second at fixed intervals, latency measured from
                      when each was due, so a stalled server shows as latency (coordinated
                      omission is not hidden); without it, closed loop: a request goes out
                      when one comes back
  --duration D        how long to send (default ${defaults.duration}); D is a number and a unit: ms s m h d
  --batch-rows N      timers a request in ndjson and arrow modes (default ${defaults.batchRows})
  --payload-bytes N   bytes of each timer's payload (default ${defaults.payloadBytes})
  --spread D..D       fire times uniformly over this window after acceptance (default
                      ${defaults.spread}); one duration (0s: due at once) for all the same
  --target URL        where the timers are to be delivered (default ${defaults.target},
                      which never resolves)
  --sink              start an HTTP/2 sink on 127.0.0.1 and target it: also reports deliveries
                      and fire lateness (arrival − fermata-fire-at); the server must be on
                      this machine and allow loopback targets (it does when it listens on loopback)
  --wait D            with --sink, how long to wait for deliveries after sending (default ${defaults.wait})
  --json              one JSON figure a line instead of the summary
  -h, --help          this text
`;

interface BenchSettings {
  readonly url: string;
  readonly token: string | undefined;
  readonly mode: BenchMode;
  readonly concurrency: number;
  readonly connections: number;
  readonly ratePerS: number | undefined;
  readonly durationMs: number;
  readonly batchRows: number;
  readonly payloadBytes: number;
  readonly spread: FireTimes & { readonly kind: 'delay' };
  readonly spreadText: string;
  readonly target: string | undefined;
  readonly sink: boolean;
  readonly waitMs: number;
  readonly json: boolean;
}

class UsageError extends Error {}

/** "1h..30d" (a window) or "0s" (one delay) → delays after acceptance. */
function parseSpread(text: string): (FireTimes & { readonly kind: 'delay' }) | undefined {
  const parts = text.split('..');
  if (parts.length > 2) return undefined;
  const [min, max] = parts.map(parseDurationMs);
  if (min === undefined) return undefined;
  if (parts.length === 1) return { kind: 'delay', minMs: min, maxMs: min };
  if (max === undefined || max < min) return undefined;
  return { kind: 'delay', minMs: min, maxMs: max };
}

function flag(name: string, message: string): never {
  throw new UsageError(`--${name} ${message}`);
}

function integerFlag(name: string, text: string | undefined, fallback: number, min: number, max: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < min || value > max) flag(name, `must be a whole number from ${min} to ${max}, not "${text}"`);
  return value;
}

function durationFlag(name: string, text: string, minMs: number): number {
  const ms = parseDurationMs(text);
  if (ms === undefined || ms < minMs) flag(name, `must be a duration of at least ${minMs} ms such as 10s, 500ms or 2m, not "${text}"`);
  return ms;
}

function parseBenchArgs(argv: string[]): BenchSettings | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        url: { type: 'string' },
        token: { type: 'string' },
        mode: { type: 'string' },
        concurrency: { type: 'string' },
        connections: { type: 'string' },
        rate: { type: 'string' },
        duration: { type: 'string' },
        'batch-rows': { type: 'string' },
        'payload-bytes': { type: 'string' },
        spread: { type: 'string' },
        target: { type: 'string' },
        sink: { type: 'boolean', default: false },
        wait: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const values = parsed.values;
  if (values.help) return 'help';

  const url = values.url ?? defaults.url;
  let parsedUrl: URL | undefined;
  try {
    parsedUrl = new URL(url);
  } catch {
    parsedUrl = undefined;
  }
  if (parsedUrl === undefined || (parsedUrl.protocol !== 'http:' && parsedUrl.protocol !== 'https:')) flag('url', `must be an http:// or https:// URL, not "${url}"`);

  const mode = values.mode ?? defaults.mode;
  if (!(benchModes as readonly string[]).includes(mode)) flag('mode', `must be one of ${benchModes.join(', ')}, not "${mode}"`);
  const concurrency = integerFlag('concurrency', values.concurrency, defaults.concurrency, 1, 100_000);
  const connections = integerFlag('connections', values.connections, Math.ceil(concurrency / streamsPerConnection), 1, 1024);

  let ratePerS: number | undefined;
  if (values.rate !== undefined) {
    ratePerS = Number(values.rate);
    if (!Number.isFinite(ratePerS) || ratePerS <= 0 || values.rate.trim() === '') flag('rate', `must be a number of requests a second > 0, not "${values.rate}"`);
  }
  const durationMs = durationFlag('duration', values.duration ?? defaults.duration, 1);

  const single = mode === 'json' || mode === 'stream';
  if (single && values['batch-rows'] !== undefined) flag('batch-rows', `applies to the ndjson and arrow modes; ${mode} sends one timer at a time`);
  const batchRows = single ? 1 : integerFlag('batch-rows', values['batch-rows'], defaults.batchRows, 1, timerLimits.rowsPerBatchMax);
  const payloadBytes = integerFlag('payload-bytes', values['payload-bytes'], defaults.payloadBytes, 0, timerLimits.payloadBytesMax);

  const spreadText = values.spread ?? defaults.spread;
  const spread = parseSpread(spreadText);
  if (spread === undefined) flag('spread', `must be a window such as 1h..30d (the first no later than the second) or one duration such as 0s, not "${spreadText}"`);

  if (values.sink && values.target !== undefined) flag('target', 'cannot go with --sink, which is the target');
  if (!values.sink && values.wait !== undefined) flag('wait', 'applies only with --sink');
  if (values.target !== undefined) {
    let target: URL | undefined;
    try {
      target = new URL(values.target);
    } catch {
      target = undefined;
    }
    if (target === undefined || (target.protocol !== 'http:' && target.protocol !== 'https:')) flag('target', `must be an http:// or https:// URL, not "${values.target}"`);
  }
  const waitMs = durationFlag('wait', values.wait ?? defaults.wait, 0);

  return {
    url,
    token: values.token,
    mode: mode as BenchMode,
    concurrency,
    connections,
    ratePerS,
    durationMs,
    batchRows,
    payloadBytes,
    spread,
    spreadText,
    target: values.sink ? undefined : (values.target ?? defaults.target),
    sink: values.sink,
    waitMs,
    json: values.json,
  };
}

export async function bench(argv: string[]): Promise<number> {
  let settings: BenchSettings | 'help';
  try {
    settings = parseBenchArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`fermata bench: ${err.message}\n\n${benchUsage}`);
    return 2;
  }
  if (settings === 'help') {
    process.stdout.write(benchUsage);
    return 0;
  }

  const sink = settings.sink ? await startSink() : undefined;
  try {
    const target = sink === undefined ? (settings.target as string) : `${sink.url}/hook`;
    const bodies = buildBodies({ mode: bodyModeOf(settings.mode), rows: settings.batchRows, payloadBytes: settings.payloadBytes, target, fire: settings.spread });
    if (!settings.json) process.stderr.write(`fermata bench: ${describeRun(settings, target, bodies.length)}\n`);
    let load: LoadResult;
    try {
      load = await (settings.mode === 'stream' ? runStreamLoad : runLoad)({
        url: settings.url,
        token: settings.token,
        bodies,
        concurrency: settings.concurrency,
        connections: settings.connections,
        ratePerS: settings.ratePerS,
        warmupMs: 0,
        durationMs: settings.durationMs,
        drainTimeoutMs,
      });
    } catch (err) {
      process.stderr.write(`fermata bench: cannot reach ${settings.url}: ${err instanceof Error ? err.message : String(err)}\n`);
      return 1;
    }
    if (sink !== undefined && !settings.json) process.stderr.write(`fermata bench: waiting up to ${settings.waitMs / 1000} s for ${load.okTimers} deliveries\n`);
    const deliveries = sink === undefined ? undefined : await awaitTimers(sink, load.okTimers, settings.waitMs);
    const figures = benchFigures(settings, target, load, deliveries);
    process.stdout.write(settings.json ? toJsonLines(figures) : summary(settings, load, deliveries));
    return load.okRequests > 0 ? 0 : 1;
  } finally {
    await sink?.close();
  }
}

/** Stream mode sends one-timer JSON bodies, one a line. */
function bodyModeOf(mode: BenchMode): BodyMode {
  return mode === 'stream' ? 'json' : mode;
}

function describeRun(settings: BenchSettings, target: string, variants: number): string {
  const stream = settings.mode === 'stream';
  const loop = settings.ratePerS === undefined ? 'closed loop' : `open loop at ${settings.ratePerS} ${stream ? 'timers' : 'requests'}/s`;
  const rows = stream ? 'one timer a line of add streams' : settings.mode === 'json' ? 'one timer a request' : `${settings.batchRows} timers a request`;
  const inFlight = stream ? `${settings.concurrency} timers in flight on ${settings.connections} add stream${settings.connections === 1 ? '' : 's'}` : `${settings.concurrency} streams on ${settings.connections} connection${settings.connections === 1 ? '' : 's'}`;
  return (
    `${settings.mode}, ${rows} (${variants} ${variants === 1 ? 'body' : 'bodies'} in turn), ${inFlight}, ` +
    `${loop}, ${settings.durationMs / 1000} s, fire times ${settings.spreadText} ` +
    `after acceptance, ${settings.payloadBytes}-byte payloads → ${settings.url}, delivered to ${target}`
  );
}

const percentiles: readonly (readonly [string, number])[] = [
  ['p50', 50],
  ['p90', 90],
  ['p99', 99],
  ['p999', 99.9],
];

/** A histogram of µs as ms figures (0 when it is empty). */
function percentileFigures(name: string, histogram: Histogram): Figure[] {
  const ms = (us: number): number => roundTo(us / 1000, 3);
  const empty = histogram.totalCount === 0;
  return [
    ...percentiles.map(([label, at]): Figure => ({ suite: 'bench', name: `${name}.${label}`, value: empty ? 0 : ms(histogram.getValueAtPercentile(at)), unit: 'ms' })),
    { suite: 'bench', name: `${name}.max`, value: empty ? 0 : ms(histogram.maxValue), unit: 'ms' },
  ];
}

/** Error keys as figure name parts: "503" → status_503, "stream ERR_X" → stream_err_x. */
function errorName(key: string): string {
  return /^\d+$/.test(key) ? `status_${key}` : key.toLowerCase().replace(/[^a-z0-9]+/g, '_');
}

function benchFigures(settings: BenchSettings, target: string, load: LoadResult, deliveries: SinkWait | undefined): Figure[] {
  const figure = (name: string, value: number, unit: string): Figure => ({ suite: 'bench', name, value, unit });
  const errorCount = [...load.errors.values()].reduce((sum, count) => sum + count, 0);
  const facts: Record<string, Fact> = {
    url: settings.url,
    mode: settings.mode,
    concurrency: settings.concurrency,
    connections: settings.connections,
    loop: settings.ratePerS === undefined ? 'closed' : 'open',
    rate_per_s: settings.ratePerS ?? 0,
    duration_s: settings.durationMs / 1000,
    batch_rows: settings.batchRows,
    payload_bytes: settings.payloadBytes,
    spread: settings.spreadText,
    bodies: poolVariants({ mode: bodyModeOf(settings.mode), rows: settings.batchRows, payloadBytes: settings.payloadBytes, target, fire: settings.spread }),
    target,
    sink: settings.sink,
  };
  const figures: Figure[] = [
    metaLine('bench', facts),
    figure('bench.requests.sent', load.sent, 'requests'),
    figure('bench.requests.ok', load.okRequests, 'requests'),
    figure('bench.timers.acked', load.okTimers, 'timers'),
    figure('bench.rate.requests_per_s', Math.round(load.spanOkRequests / load.spanSeconds), '1/s'),
    figure('bench.rate.timers_per_s', Math.round(load.spanOkTimers / load.spanSeconds), '1/s'),
    ...percentileFigures('bench.ack_latency_ms', load.latencyUs),
    figure('bench.errors', errorCount, 'requests'),
    ...[...load.errors].map(([key, count]) => figure(`bench.errors.${errorName(key)}`, count, 'requests')),
    figure('bench.unanswered', load.unanswered, 'requests'),
  ];
  if (settings.ratePerS !== undefined) figures.push(figure('bench.unsent', load.unsent, 'requests'));
  if (deliveries !== undefined) {
    const { snapshot, waitedMs } = deliveries;
    figures.push(
      figure('bench.delivered', snapshot.timers, 'timers'),
      figure('bench.undelivered', Math.max(0, load.okTimers - snapshot.timers), 'timers'),
      figure('bench.early', snapshot.early, 'timers'),
      figure('bench.delivery_wait_s', roundTo(waitedMs / 1000, 3), 's'),
      ...percentileFigures('bench.lateness_ms', snapshot.latenessUs),
    );
  }
  return figures;
}

function percentileLine(histogram: Histogram): string {
  if (histogram.totalCount === 0) return 'none recorded';
  const ms = (us: number): string => (us / 1000).toFixed(us < 10_000 ? 3 : 1);
  return [...percentiles.map(([label, at]) => `${label} ${ms(histogram.getValueAtPercentile(at))}`), `max ${ms(histogram.maxValue)}`].join('  ');
}

function summary(settings: BenchSettings, load: LoadResult, deliveries: SinkWait | undefined): string {
  const lines: string[] = [];
  const errorCount = [...load.errors.values()].reduce((sum, count) => sum + count, 0);
  const rate = (count: number): string => Math.round(count / load.spanSeconds).toLocaleString('en-US');
  lines.push(`requests     ${load.sent} sent, ${load.okRequests} acknowledged (${load.okTimers} timers), ${errorCount} errors, ${load.unanswered} unanswered`);
  lines.push(`rate         ${rate(load.spanOkRequests)} requests/s, ${rate(load.spanOkTimers)} timers/s over ${load.spanSeconds} s`);
  lines.push(`ack latency  ms  ${percentileLine(load.latencyUs)}${settings.ratePerS === undefined ? '' : '  (from when each request was due)'}`);
  if (settings.ratePerS !== undefined && load.unsent > 0) lines.push(`unsent       ${load.unsent} requests fell due but were never sent: the server did not keep up`);
  if (errorCount > 0) {
    lines.push(`errors       ${[...load.errors].map(([key, count]) => `${key} ×${count}`).join(', ')}`);
    lines.push(`first error  ${load.firstError ?? ''}`);
  }
  if (deliveries !== undefined) {
    const { snapshot, waitedMs } = deliveries;
    const missing = load.okTimers - snapshot.timers;
    lines.push(`delivered    ${snapshot.timers} of ${load.okTimers} timers after waiting ${(waitedMs / 1000).toFixed(1)} s${missing > 0 ? ` (${missing} not yet: --wait longer, or a narrower --spread)` : ''}, ${snapshot.early} early`);
    lines.push(`lateness     ms  ${percentileLine(snapshot.latenessUs)}  (arrival − fire time)`);
  }
  return lines.join('\n') + '\n';
}
