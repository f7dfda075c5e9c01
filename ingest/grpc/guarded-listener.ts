// The gRPC port's TCP listener, in front of grpc-js (its connection injector) so that the HTTP
// listener's peer guard (http/listen/peer-guard.ts) sees these connections too: a peer the guard
// penalised, on either port, has its new connections reset here before any TLS or HTTP/2 work;
// an HTTP/2 session grpc-js gave up on for its peer's frames (rapid reset, floods: node closes
// the session and destroys the socket with the ERR_HTTP2_ERROR) is an offence, and a penalty
// that starts closes the peer's other gRPC connections. Main thread.
import net from 'node:net';
import type { Server, ServerCredentials } from '@grpc/grpc-js';
import type { PeerGuard } from '../http/listen/peer-guard.ts';

export interface GuardedPort {
  readonly port: number;
  /** Stops accepting; the connections already served are the grpc-js server's to drain (its tryShutdown). */
  close(): void;
}

/** Binds `host:port` and hands each admitted connection to `server`'s injector for `credentials`. */
export async function listenGuarded(server: Server, credentials: ServerCredentials, host: string, port: number, guard: PeerGuard): Promise<GuardedPort> {
  const injector = server.createConnectionInjector(credentials);
  const open = new Set<net.Socket>();
  const tcp = net.createServer({ noDelay: true }, (socket) => {
    if (!guard.admits(socket)) return void socket.resetAndDestroy();
    open.add(socket);
    socket.once('close', () => open.delete(socket));
    socket.on('error', (err) => {
      const penalty = guard.sessionError(socket.remoteAddress, err);
      if (penalty === undefined) return;
      for (const other of open) if (guard.belongsTo(other, penalty.peer)) other.destroy();
    });
    injector.injectConnection(socket);
  });
  await new Promise<void>((resolve, reject) => {
    tcp.once('error', reject);
    tcp.listen({ host, port }, () => {
      tcp.off('error', reject);
      resolve();
    });
  });
  const address = tcp.address();
  if (address === null || typeof address === 'string') throw new Error('a TCP listener has an address once listening');
  return {
    port: address.port,
    close: () => void tcp.close(),
  };
}
