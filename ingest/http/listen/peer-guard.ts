// What makes a connection abusive, and what its peer gets for it. The listeners
// (cleartext-listener.ts, tls-listener.ts) ask admits() for each new connection before any TLS
// or HTTP work, and reset a refused one; they report here how HTTP/2 sessions and HTTP/1.1
// connections fail. An offence is a connection the server closed because its peer went past
// a protocol limit (engine/limits.ts, httpLimits):
//
//   HTTP/2 session 'error' ERR_HTTP2_ERROR   nghttp2 or node gave up on the peer's frames: the
//                                            reset rate limit (rapid reset; node 26 reports it
//                                            as errno -505, "Protocol error"), too many
//                                            CONTINUATION frames (-905), node's invalid-frame and
//                                            refused-stream limits (-902), PING/SETTINGS floods
//                                            (-904), any other protocol violation
//   HTTP/1.1 clientError HPE_HEADER_OVERFLOW a header block past headerListBytesMax (a flood)
//
// Ordinary clients commit none: a stream cancelled now and then, a 431 for one oversized
// request, a connection reset. Offences go to the penalty table (peer-penalty.ts); a penalty
// is logged (one warn line, at most logLinesPerMinuteMax a minute) and counted for /metrics.
//
// Never penalised: the host's own loopback address (127.0.0.1, ::1). Whatever proxies in front
// of fermata on the same host connects from there (the HTTP/3 adapter's Caddy forwards every
// HTTP/3 client over h2c from it, and so would an nginx), and one abusive client behind it must
// not cut off all the others. The same holds for any proxy elsewhere: its address is every
// client's, so abuse through it is the proxy's to limit. Owned by the main thread's event loop.
import type net from 'node:net';
import { type Clock, systemClock } from '../../../engine/engine.ts';
import { type PeerPenaltyLimits, peerPenaltyLimits } from '../../../engine/limits.ts';
import { type Penalty, PeerPenalties, peerKey } from './peer-penalty.ts';

export interface PeerGuardLogger {
  warn(fields: object, message: string): void;
}

export interface PeerGuardOptions {
  readonly logger: PeerGuardLogger;
  readonly limits?: PeerPenaltyLimits;
  readonly clock?: Clock;
}

/** What /metrics shows (routes/metrics.ts), counted since the guard was made. */
export interface PeerGuardCounters {
  /** Connections closed for abuse: offences, exempt peers' included. */
  abusiveConnections: number;
  /** Penalties started. */
  penalties: number;
  /** New connections refused because their peer was penalised. */
  refusedConnections: number;
}

/** The host's own loopback address (see the top of this file), keyed: 127.0.0.1 (also IPv4-mapped), or ::1 itself, not its /64. */
function isHostLoopback(address: string, peer: string): boolean {
  return peer === '127.0.0.1' || address === '::1';
}
const minuteMs = 60_000;

/** The HTTP/1.1 parser errors that are a flood rather than a client's slip. */
const http1Offences: ReadonlySet<string> = new Set(['HPE_HEADER_OVERFLOW']);

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

export class PeerGuard {
  readonly table: PeerPenalties;
  readonly counters: PeerGuardCounters = { abusiveConnections: 0, penalties: 0, refusedConnections: 0 };
  readonly #logger: PeerGuardLogger;
  readonly #clock: Clock;
  readonly #logLinesPerMinuteMax: number;
  #logMinuteStartMs = Number.NEGATIVE_INFINITY;
  #logLinesThisMinute = 0;
  #penaltiesNotLogged = 0;

  constructor(options: PeerGuardOptions) {
    const limits = options.limits ?? peerPenaltyLimits;
    this.#clock = options.clock ?? systemClock;
    this.table = new PeerPenalties(limits, this.#clock);
    this.#logger = options.logger;
    this.#logLinesPerMinuteMax = limits.logLinesPerMinuteMax;
  }

  /** Whether to serve a new connection; when not, the caller resets it at once. */
  admits(socket: net.Socket): boolean {
    const address = socket.remoteAddress;
    if (address === undefined || !this.table.refuses(peerKey(address))) return true;
    this.counters.refusedConnections++;
    return false;
  }

  /** An HTTP/2 session of `address` emitted 'error'; the penalty that starts, if one does (the caller closes the peer's other connections). */
  sessionError(address: string | undefined, err: unknown): Penalty | undefined {
    if (errorCode(err) !== 'ERR_HTTP2_ERROR') return undefined;
    return this.#offence(address, err);
  }

  /** An HTTP/1.1 connection of `address` failed to parse; the penalty that starts, if one does. */
  http1ClientError(address: string | undefined, err: unknown): Penalty | undefined {
    const code = errorCode(err);
    if (code === undefined || !http1Offences.has(code)) return undefined;
    return this.#offence(address, err);
  }

  /** Whether `socket` is a connection of the penalised peer `peer` (a Penalty's). */
  belongsTo(socket: net.Socket, peer: string): boolean {
    return socket.remoteAddress !== undefined && peerKey(socket.remoteAddress) === peer;
  }

  #offence(address: string | undefined, err: unknown): Penalty | undefined {
    this.counters.abusiveConnections++;
    if (address === undefined) return undefined;
    const peer = peerKey(address);
    if (isHostLoopback(address, peer)) return undefined;
    const penalty = this.table.offend(peer);
    if (penalty === undefined) return undefined;
    this.counters.penalties++;
    this.#log(penalty, err);
    return penalty;
  }

  #log(penalty: Penalty, err: unknown): void {
    const now = this.#clock.now();
    if (now - this.#logMinuteStartMs >= minuteMs) {
      this.#logMinuteStartMs = now;
      this.#logLinesThisMinute = 0;
    }
    if (this.#logLinesThisMinute >= this.#logLinesPerMinuteMax) {
      this.#penaltiesNotLogged++;
      return;
    }
    this.#logLinesThisMinute++;
    const reason = err instanceof Error ? `${errorCode(err) ?? err.name}: ${err.message}` : String(err);
    this.#logger.warn(
      { peer: penalty.peer, reason, coolDownMs: penalty.coolDownMs, penalties: penalty.penalties, penaltiesNotLogged: this.#penaltiesNotLogged },
      'peer penalised for abusive connections: its connections are refused for the cool-down',
    );
    this.#penaltiesNotLogged = 0;
  }
}
