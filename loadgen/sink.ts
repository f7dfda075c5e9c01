// The benchmarks' delivery target: an HTTP/2 cleartext (prior knowledge) server on 127.0.0.1,
// port 0, that answers every request 200 with no body once its body has arrived, and counts
// what came: requests, timers (an Arrow delivery's `fermata-batch-rows`, else 1), and fire
// lateness, arrival − `fermata-fire-at` (the sender's intended fire time, epoch ms), in an hdr
// histogram of microseconds. A request that arrived before its fire time by the wall clock
// (Date.now(), the clock fermata's "never early" is stated in and its workers check) counts as
// early. The lateness itself is taken from the monotonic clock (performance.now(), for its
// sub-millisecond precision), which drifts from the wall clock by a millisecond or more within
// seconds while NTP slews it; timers sent at their fire time must not be called early for that.
//
// Runs in the caller's process (`startSink`, for `fermata bench --sink`), or in a child process
// of its own (`startSinkProcess`, this file forked with the argument `sink`) so that a
// benchmark's sender and its target do not share one event loop; then counts and the histogram
// come back over IPC. Both give the same `BenchSink`.
import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import * as hdr from 'hdr-histogram-js';
import { httpLimits } from '../engine/limits.ts';
import { newMicrosHistogram } from './load-generator.ts';

export interface SinkSnapshot {
  readonly requests: number;
  readonly timers: number;
  /** Requests that arrived before their fermata-fire-at by the wall clock. */
  readonly early: number;
  /** Wall-clock ms of the last arrival (0 before any). */
  readonly lastArrivalMs: number;
  /** Arrival − fermata-fire-at of requests that carried it and were not early, in µs. */
  readonly latenessUs: hdr.Histogram;
}

export interface BenchSink {
  /** http://127.0.0.1:PORT */
  readonly url: string;
  snapshot(): Promise<SinkSnapshot>;
  /** Zeroes the counts and the histogram. */
  reset(): Promise<void>;
  close(): Promise<void>;
}

export interface Tally {
  requests: number;
  timers: number;
  early: number;
  lastArrivalMs: number;
  latenessUs: hdr.Histogram;
}

export function newTally(): Tally {
  return { requests: 0, timers: 0, early: 0, lastArrivalMs: 0, latenessUs: newMicrosHistogram() };
}

/**
 * Counts one request that arrived at `arrivalMs` by the monotonic clock and `arrivalWallMs` by
 * the wall clock: early by the wall clock, late by the monotonic one (at least 1 µs).
 */
export function countArrival(tally: Tally, headers: http2.IncomingHttpHeaders, arrivalMs: number, arrivalWallMs: number): void {
  tally.requests++;
  const rows = headers['fermata-batch-rows'];
  tally.timers += typeof rows === 'string' ? Number(rows) : 1;
  tally.lastArrivalMs = arrivalMs;
  const fireAt = headers['fermata-fire-at'];
  if (typeof fireAt !== 'string') return;
  const fireAtMs = Number(fireAt);
  if (arrivalWallMs < fireAtMs) tally.early++;
  else tally.latenessUs.recordValue(Math.max(1, Math.round((arrivalMs - fireAtMs) * 1000)));
}

interface Listening {
  readonly server: http2.Http2Server;
  readonly url: string;
  readonly sessions: Set<http2.ServerHttp2Session>;
  /** The current tally (replaced by reset). */
  tally: Tally;
}

async function listen(): Promise<Listening> {
  // Room for every stream a sender may keep in flight on one session, and the flow-control
  // windows fermata's own ingest advertises for Arrow batches: with HTTP/2's 64 KiB defaults a
  // 2 MB batch waits for some 30 window updates and the drain measures the sink's window.
  const server = http2.createServer({ maxSessionMemory: 256, settings: { maxConcurrentStreams: 4096, initialWindowSize: httpLimits.http2StreamWindowBytes } });
  const listening: Listening = { server, url: '', sessions: new Set(), tally: newTally() };
  server.on('session', (session: http2.ServerHttp2Session) => {
    listening.sessions.add(session);
    session.setLocalWindowSize(httpLimits.http2SessionWindowBytes);
    session.once('close', () => listening.sessions.delete(session));
  });
  server.on('stream', (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => {
    stream.on('error', ignore);
    stream.once('end', () => {
      countArrival(listening.tally, headers, performance.timeOrigin + performance.now(), Date.now());
      stream.respond({ ':status': 200 }, { endStream: true });
    });
    stream.resume();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return Object.assign(listening, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
}

function ignore(): void {}

/** How often awaitTimers looks at the sink. */
const pollMs = 10;

export interface SinkWait {
  readonly snapshot: SinkSnapshot;
  readonly waitedMs: number;
}

/** Waits until the sink has had `expected` timers, at most `waitMs`; the last snapshot either way. */
export async function awaitTimers(sink: BenchSink, expected: number, waitMs: number): Promise<SinkWait> {
  const started = performance.now();
  for (;;) {
    const snapshot = await sink.snapshot();
    const waitedMs = performance.now() - started;
    if (snapshot.timers >= expected || waitedMs >= waitMs) return { snapshot, waitedMs };
    await sleep(pollMs);
  }
}

/** Closes the server and every session a sender left open (an idle session would hold it open). */
function closeServer(listening: Listening): Promise<void> {
  const closed = new Promise<void>((resolve) => listening.server.close(() => resolve()));
  for (const session of listening.sessions) session.destroy();
  return closed;
}

export async function startSink(): Promise<BenchSink> {
  const listening = await listen();
  return {
    url: listening.url,
    snapshot: () => Promise.resolve({ ...listening.tally }),
    reset: () => {
      listening.tally = newTally();
      return Promise.resolve();
    },
    close: () => closeServer(listening),
  };
}

type Request = 'snapshot' | 'reset';

type Reply =
  | { readonly kind: 'url'; readonly url: string }
  | { readonly kind: 'snapshot'; readonly requests: number; readonly timers: number; readonly early: number; readonly lastArrivalMs: number; readonly lateness: string }
  | { readonly kind: 'reset' };

/** The sink in a child process; its replies come in the order of the requests. */
export async function startSinkProcess(): Promise<BenchSink> {
  // Without the GLIBC_TUNABLES that fermata's runtime settings give the suites' process
  // (glibc.malloc.hugetlb=1, bin/huge-pages.js): those are the service's choice, not its
  // target's. Node hands each body chunk over in memory of its own, freed in bursts by V8's GC,
  // and under huge pages the sink faulted and zeroed 2 MiB pages again for each burst of 2 MB
  // Arrow bodies: 42 ms of its main thread in a 186 ms warm drain of 200,000 timers (perf),
  // CPU taken from fermata on a two-core machine. Without them a second Arrow drain through the
  // same dispatcher went from 0.85–1.31 to 1.27–1.41 million a second (alternated runs).
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => name !== 'GLIBC_TUNABLES'));
  // The child's stdout goes to our stderr: a suite's stdout carries figures only.
  const child: ChildProcess = fork(import.meta.filename, ['sink'], { stdio: ['ignore', 2, 'inherit', 'ipc'], env });
  const waiting: { resolve: (reply: Reply) => void; reject: (err: Error) => void }[] = [];
  let gone: Error | undefined;
  child.on('message', (reply: Reply) => waiting.shift()?.resolve(reply));
  child.once('exit', (code, signal) => {
    gone = new Error(`the sink process exited (${code ?? signal})`);
    for (const waiter of waiting.splice(0)) waiter.reject(gone);
  });
  const next = (): Promise<Reply> =>
    new Promise((resolve, reject) => {
      if (gone !== undefined) reject(gone);
      else waiting.push({ resolve, reject });
    });
  const ready = await next();
  assert.ok(ready.kind === 'url', 'the sink process names its URL first');
  const ask = (request: Request): Promise<Reply> => {
    const reply = next();
    child.send(request);
    return reply;
  };
  return {
    url: ready.url,
    snapshot: async () => {
      const reply = await ask('snapshot');
      assert.ok(reply.kind === 'snapshot', 'the sink process answers a snapshot');
      const { requests, timers, early, lastArrivalMs } = reply;
      return { requests, timers, early, lastArrivalMs, latenessUs: hdr.decodeFromCompressedBase64(reply.lateness, 32, false) as hdr.Histogram };
    },
    reset: async () => {
      await ask('reset');
    },
    close: async () => {
      if (gone !== undefined) return;
      const exited = once(child, 'exit');
      child.disconnect();
      await exited;
    },
  };
}

/** Child: serves until the parent disconnects; answers each request over IPC. */
async function sinkMain(): Promise<void> {
  const send = process.send?.bind(process);
  assert.ok(send !== undefined, 'the sink process runs with an IPC channel (fork)');
  const listening = await listen();
  process.on('message', (request: Request) => {
    if (request === 'reset') {
      listening.tally = newTally();
      send({ kind: 'reset' } satisfies Reply);
      return;
    }
    const { requests, timers, early, lastArrivalMs, latenessUs } = listening.tally;
    send({ kind: 'snapshot', requests, timers, early, lastArrivalMs, lateness: hdr.encodeIntoCompressedBase64(latenessUs) } satisfies Reply);
  });
  process.once('disconnect', () => {
    void closeServer(listening).then(() => process.exit(0));
  });
  send({ kind: 'url', url: listening.url } satisfies Reply);
}

if (import.meta.main && process.argv[2] === 'sink') await sinkMain();
