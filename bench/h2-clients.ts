// The `h2-clients` suite: which HTTP/2 client should fermata's delivery workers use (issue 5:
// "node:http2 or undici, measured: pick the faster")? Four clients send the same requests to
// the benchmark sink (loadgen/sink.ts, a child process: cleartext HTTP/2 with prior knowledge on
// 127.0.0.1), each over one session, each with requestsPerOriginMax requests in flight (what a
// delivery worker may send one origin at once), a new request as soon as one is answered:
//
//   node_http2      node:http2 bare: one session, a stream per request (bench/dispatch.ts's ceiling)
//   undici          undici's H2CClient (h2c, prior knowledge), client.request(); the body is dumped
//   undici_dispatch the same client through client.dispatch() and a minimal handler, no streams
//                   or promises of undici's request API in between
//   origin_clients  fermata's OriginClients.send() (dispatch/origin-clients.ts): node:http2 with
//                   fermata's per-origin slots, timeouts and guard (loopback allowed)
//
// Every request is the one fermata sends: POST /hook, a 128-byte body, content-type,
// content-length, fermata-timer-id, fermata-attempt, fermata-fire-at, idempotency-key.
//
// Each client warms up first (its session opened, its code hot); during the warm-up every
// HTTP/2 client stream this process creates is counted through node:http2's diagnostics channel
// (undici speaks HTTP/2 through node:http2 too), so each client is checked to send one stream
// per request over exactly one session; the sink, HTTP/2 only, counts every request it got.
// Then the clients take turns (A B C D, B C D A, …) for the rounds, and each client's figure is
// its median round: the machine is shared, so a client is only compared with the others of the
// same run. Besides the rate, each round measures this process's CPU time per request (the
// sink is another process): the client's own cost, which other load on the machine disturbs
// far less than it disturbs the rate. Latency (send → answer) goes into one histogram per
// client over all rounds; with a full window in flight it is mostly the wait behind the others.
import assert from 'node:assert/strict';
import diagnostics from 'node:diagnostics_channel';
import { once } from 'node:events';
import http2 from 'node:http2';
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Histogram } from 'hdr-histogram-js';
import { type Dispatcher as UndiciDispatcher, H2CClient } from 'undici';
import { OriginClients } from '../dispatch/origin-clients.ts';
import { TargetGuard } from '../dispatch/target-guard.ts';
import { encodeTimerId } from '../engine/ids.ts';
import { dispatchLimits } from '../engine/limits.ts';
import { defaultQueueConfig } from '../engine/queues.ts';
import { newMicrosHistogram } from '../loadgen/load-generator.ts';
import { type Fact, type Figure, median, metaLine, roundTo, type SuiteOptions } from './report.ts';
import { type BenchSink, startSinkProcess } from '../loadgen/sink.ts';

const suite = 'h2_clients';
const payloadBytes = 128;
const path = '/hook';

interface Sizes {
  readonly rounds: number;
  readonly requestsPerRound: number;
  readonly warmupRequests: number;
}

const quickSizes: Sizes = { rounds: 3, requestsPerRound: 20_000, warmupRequests: 10_000 };
const fullSizes: Sizes = { rounds: 5, requestsPerRound: 100_000, warmupRequests: 20_000 };

/** Sends one request; `done` is called once its answer's headers (and for undici, its end) arrived. */
type Send = (headers: Record<string, string>, done: (status: number) => void, fail: (err: unknown) => void) => void;

interface Client {
  /** The figure name's middle part: h2_clients.<name>.per_s. */
  readonly name: string;
  readonly send: Send;
  close(): Promise<void>;
}

interface Tally {
  readonly rates: number[];
  readonly cpuUsPerRequest: number[];
  readonly latencyUs: Histogram;
}

export async function h2ClientsSuite(options: SuiteOptions): Promise<Figure[]> {
  const sizes = options.quick ? quickSizes : fullSizes;
  const { progress } = options;
  const streams = dispatchLimits.requestsPerOriginMax;
  const sink = await startSinkProcess();
  const clients: Client[] = [];
  try {
    clients.push(await nodeHttp2Client(sink), undiciRequestClient(sink, streams), undiciDispatchClient(sink, streams), originClientsClient(sink, streams));
    const verified: Record<string, Fact> = {};
    for (const client of clients) {
      progress(`h2-clients: warm-up, ${client.name}, ${sizes.warmupRequests} requests, ${streams} in flight`);
      // Latencies recorded and thrown away: the warm-up runs the same code as the rounds.
      const seen = await countHttp2Streams(() => drive(client.send, sizes.warmupRequests, streams, newMicrosHistogram()));
      assert.equal(seen.streams, sizes.warmupRequests, `${client.name}: one HTTP/2 client stream per request`);
      assert.equal(seen.sessions, 1, `${client.name}: every stream on one HTTP/2 session`);
      verified[`${client.name}_warmup_h2_streams`] = seen.streams;
      verified[`${client.name}_warmup_h2_sessions`] = seen.sessions;
    }
    await sink.reset();

    const tallies = new Map<string, Tally>(clients.map((client) => [client.name, { rates: [], cpuUsPerRequest: [], latencyUs: newMicrosHistogram() }]));
    for (let round = 0; round < sizes.rounds; round++) {
      // Each round starts with the next client: the first turn after the warm-ups runs slow, and no one client should always take it.
      for (const client of [...clients.slice(round % clients.length), ...clients.slice(0, round % clients.length)]) {
        const tally = tallies.get(client.name) as Tally;
        const { perS, cpuUsPerRequest } = await drive(client.send, sizes.requestsPerRound, streams, tally.latencyUs);
        tally.rates.push(perS);
        tally.cpuUsPerRequest.push(cpuUsPerRequest);
        progress(`h2-clients: round ${round + 1} of ${sizes.rounds}, ${client.name} ${Math.round(perS)}/s, ${cpuUsPerRequest.toFixed(1)} µs CPU a request`);
      }
    }
    const got = await sink.snapshot();
    const sent = sizes.rounds * sizes.requestsPerRound * clients.length;
    assert.equal(got.requests, sent, 'the sink (HTTP/2 only) got every request once');

    const perS = (name: string): number => median((tallies.get(name) as Tally).rates);
    const cpuUs = (name: string): number => median((tallies.get(name) as Tally).cpuUsPerRequest);
    const bare = perS('node_http2');
    const bareCpuUs = cpuUs('node_http2');
    const figures: Figure[] = [];
    const figure = (name: string, value: number, unit: string): void => {
      figures.push({ suite, name: `${suite}.${name}`, value, unit });
    };
    for (const client of clients) figure(`${client.name}.per_s`, Math.round(perS(client.name)), '1/s');
    for (const client of clients) if (client.name !== 'node_http2') figure(`${client.name}.ratio`, roundTo(perS(client.name) / bare, 3), 'ratio');
    for (const client of clients) figure(`${client.name}.cpu_us_per_request`, roundTo(cpuUs(client.name), 1), 'us');
    for (const client of clients) if (client.name !== 'node_http2') figure(`${client.name}.cpu_ratio`, roundTo(cpuUs(client.name) / bareCpuUs, 3), 'ratio');
    for (const client of clients) {
      const { latencyUs } = tallies.get(client.name) as Tally;
      figure(`${client.name}.latency_ms.p50`, roundTo(latencyUs.getValueAtPercentile(50) / 1000, 3), 'ms');
      figure(`${client.name}.latency_ms.p99`, roundTo(latencyUs.getValueAtPercentile(99) / 1000, 3), 'ms');
    }
    const facts: Record<string, Fact> = {
      node: process.version,
      cpus: cpus().length,
      quick: options.quick,
      undici: undiciVersion,
      streams_in_flight: streams,
      rounds: sizes.rounds,
      requests_per_round: sizes.requestsPerRound,
      warmup_requests: sizes.warmupRequests,
      payload_bytes: payloadBytes,
      sink_requests: got.requests,
      ...verified,
    };
    for (const client of clients) facts[`${client.name}_rounds_per_s`] = (tallies.get(client.name) as Tally).rates.map((rate) => Math.round(rate)).join(' ');
    return [metaLine(suite, facts), ...figures];
  } finally {
    for (const client of clients) await client.close();
    await sink.close();
  }
}

// ---- the driver ---------------------------------------------------------------------------------

interface Driven {
  readonly perS: number;
  /** CPU time (user + system) of this process, all its threads, per request: what the client costs, whoever else shares the machine. */
  readonly cpuUsPerRequest: number;
}

/**
 * Sends `count` requests, `inFlight` at a time (a new one as each is answered); records send →
 * answer of each in `latencyUs`.
 */
function drive(send: Send, count: number, inFlight: number, latencyUs: Histogram): Promise<Driven> {
  const fireAtMs = String(Date.now());
  let sent = 0;
  let answered = 0;
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  return new Promise((resolve, reject) => {
    const fail = (err: unknown): void => reject(err instanceof Error ? err : new Error(String(err)));
    const next = (): void => {
      const id = encodeTimerId(1, sent++, Number(fireAtMs));
      const sentAt = performance.now();
      const headers = { 'content-type': 'application/octet-stream', 'fermata-timer-id': id, 'fermata-attempt': '1', 'fermata-fire-at': fireAtMs, 'idempotency-key': id };
      send(
        headers,
        (status) => {
          if (status !== 200) return fail(new Error(`the sink answered ${status}`));
          latencyUs.recordValue(Math.max(1, Math.round((performance.now() - sentAt) * 1000)));
          answered++;
          if (sent < count) next();
          else if (answered === count) {
            const cpu = process.cpuUsage(cpuBefore);
            resolve({ perS: count / ((performance.now() - started) / 1000), cpuUsPerRequest: (cpu.user + cpu.system) / count });
          }
        },
        fail,
      );
    };
    for (let i = 0; i < Math.min(inFlight, count); i++) next();
  });
}

const body = Buffer.from(new Uint8Array(payloadBytes).map((_, i) => (i * 31 + 7) & 0xff));

// ---- the clients --------------------------------------------------------------------------------

async function nodeHttp2Client(sink: BenchSink): Promise<Client> {
  const session = http2.connect(sink.url, { maxSessionMemory: 64 });
  await once(session, 'remoteSettings');
  const authority = new URL(sink.url).host;
  return {
    name: 'node_http2',
    send: (headers, done, fail) => {
      const stream = session.request({ ':method': 'POST', ':path': path, ':authority': authority, 'content-length': payloadBytes, ...headers });
      stream.once('response', (answer) => {
        stream.resume();
        done(Number(answer[':status']));
      });
      stream.once('error', fail);
      stream.end(body);
    },
    close: async () => {
      session.close();
      if (!session.destroyed) await once(session, 'close');
    },
  };
}

/** undici's h2c client: one connection, `streams` requests multiplexed on it at most. */
function newUndiciClient(sink: BenchSink, streams: number): H2CClient {
  return new H2CClient(sink.url, { maxConcurrentStreams: streams, pipelining: streams });
}

function undiciRequestClient(sink: BenchSink, streams: number): Client {
  const client = newUndiciClient(sink, streams);
  return {
    name: 'undici',
    send: (headers, done, fail) => {
      client.request({ method: 'POST', path, headers: { 'content-length': String(payloadBytes), ...headers }, body }).then(async (answer) => {
        await answer.body.dump();
        done(answer.statusCode);
      }, fail);
    },
    close: () => client.close(),
  };
}

/** undici's lowest-level API: a handler object per request, called back as the answer arrives. */
class AnswerHandler implements UndiciDispatcher.DispatchHandler {
  #status = 0;
  readonly #done: (status: number) => void;
  readonly #fail: (err: unknown) => void;

  constructor(done: (status: number) => void, fail: (err: unknown) => void) {
    this.#done = done;
    this.#fail = fail;
  }

  // undici requires onRequestStart and onResponseData even when there is nothing to do in them.
  onRequestStart(): void {}

  onResponseStart(_controller: UndiciDispatcher.DispatchController, statusCode: number): void {
    this.#status = statusCode;
  }

  onResponseData(): void {}

  onResponseEnd(): void {
    this.#done(this.#status);
  }

  onResponseError(_controller: UndiciDispatcher.DispatchController, err: Error): void {
    this.#fail(err);
  }
}

function undiciDispatchClient(sink: BenchSink, streams: number): Client {
  const client = newUndiciClient(sink, streams);
  return {
    name: 'undici_dispatch',
    send: (headers, done, fail) => {
      client.dispatch({ method: 'POST', path, headers: { 'content-length': String(payloadBytes), ...headers }, body }, new AnswerHandler(done, fail));
    },
    close: () => client.close(),
  };
}

function originClientsClient(sink: BenchSink, streams: number): Client {
  const clients = new OriginClients({
    guard: new TargetGuard({ allowLoopback: true }),
    sessionIdleMsMax: dispatchLimits.sessionIdleMsMax,
    connectTimeoutMs: dispatchLimits.connectTimeoutMs,
    requestsPerOriginMax: streams,
    socketsPerOriginMax: dispatchLimits.socketsPerOriginMax,
  });
  const url = new URL(path, sink.url);
  return {
    name: 'origin_clients',
    send: (headers, done, fail) => {
      clients.send({ url, headers, body, timeoutMs: defaultQueueConfig.timeout_ms }).then((answer) => done(answer.status), fail);
    },
    close: () => {
      clients.close();
      return Promise.resolve();
    },
  };
}

// ---- the HTTP/2 check ------------------------------------------------------------------------------

const undiciVersion: string = (await import('undici/package.json', { with: { type: 'json' } })).default.version;

interface Http2Seen {
  readonly streams: number;
  readonly sessions: number;
}

/** HTTP/2 client streams this process creates while `run` runs, and the sessions they are on. */
async function countHttp2Streams(run: () => Promise<unknown>): Promise<Http2Seen> {
  const sessions = new Set<http2.Http2Session>();
  let streams = 0;
  const onStream = (message: unknown): void => {
    streams++;
    sessions.add((message as { readonly stream: http2.ClientHttp2Stream }).stream.session as http2.Http2Session);
  };
  diagnostics.subscribe('http2.client.stream.created', onStream);
  try {
    await run();
  } finally {
    diagnostics.unsubscribe('http2.client.stream.created', onStream);
  }
  return { streams, sessions: sessions.size };
}
