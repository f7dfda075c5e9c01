// The optional TLS port: the handshake's ALPN names the protocol (h2 or http/1.1; a client that
// offers none gets HTTP/1.1, as https servers do), and each connection, once secure, is handed
// to the same inner HTTP/1.1 and HTTP/2 servers the cleartext port uses (cleartext-listener.ts).
// So both ports share one request handler, one set of HTTP/2 hardening limits, one peer guard
// (a penalised peer's connection is reset before its handshake) and one drain.
//
//   accept ─► TLS handshake (≤ sniffTimeoutMs) ─┬─ ALPN "h2" ──────────────► http2 server ─┐
//                                               └─ "http/1.1" or no ALPN ─► http server ───┴─► handler
//
// Owned by the main thread's event loop, like every server in the process.
import type net from 'node:net';
import tls from 'node:tls';
import { httpLimits } from '../../../engine/limits.ts';

/** What the port negotiates, in the server's order of preference. */
export const alpnProtocols = ['h2', 'http/1.1'] as const;

export type NegotiatedProtocol = (typeof alpnProtocols)[number];

/** PEM text or bytes: a certificate (chain) and its private key. */
export interface TlsCredentials {
  readonly cert: string | Buffer;
  readonly key: string | Buffer;
}

/** Takes a connection whose protocol is settled; the listener forgets it then. */
export type SecureConnectionHandler = (socket: tls.TLSSocket, protocol: NegotiatedProtocol) => void;

export class TlsListener extends tls.Server {
  /** Every accepted TCP connection until it closes, handshake done or not: what a cut destroys. */
  readonly #connections = new Set<net.Socket>();
  #closing = false;

  constructor(credentials: TlsCredentials, handOver: SecureConnectionHandler, admits: (socket: net.Socket) => boolean) {
    super({
      cert: credentials.cert,
      key: credentials.key,
      ALPNProtocols: [...alpnProtocols],
      // A connection that has not shown its protocol in this time is closed, as on the cleartext port.
      handshakeTimeout: httpLimits.sniffTimeoutMs,
      noDelay: true,
    });
    this.on('connection', (socket: net.Socket) => {
      if (!admits(socket)) {
        socket.resetAndDestroy();
        return;
      }
      this.#connections.add(socket);
      socket.once('close', () => this.#connections.delete(socket));
    });
    this.on('secureConnection', (socket: tls.TLSSocket) => {
      // A handshake that finishes after close() began would start a session no GOAWAY reaches.
      if (this.#closing) socket.destroy();
      else handOver(socket, socket.alpnProtocol === 'h2' ? 'h2' : 'http/1.1');
    });
  }

  /** Stops accepting; a handshake still under way is dropped when it completes (or times out). */
  override close(callback?: (err?: Error) => void): this {
    this.#closing = true;
    return super.close(callback);
  }

  /** Destroys every connection this port accepted, handshaking or serving: the bound on a graceful close. */
  closeAllConnections(): void {
    for (const socket of this.#connections) socket.destroy();
  }
}
