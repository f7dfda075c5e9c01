// The TLS port tells clients that the same origin speaks HTTP/3 on the --http3 port (RFC 7838
// Alt-Svc), so a browser or other h3-capable client that came in over h2 moves to QUIC. Only
// answers on the TLS port carry it: an http:// origin cannot be upgraded to h3.
import type { HttpServer } from '../http/types.ts';

/** How long a client may remember the alternative, in seconds. */
const altSvcMaxAgeSeconds = 86_400;

export function altSvcValue(port: number): string {
  return `h3=":${port}"; ma=${altSvcMaxAgeSeconds}`;
}

/** Adds the header to every answer on the TLS port; call before the server listens. */
export function advertiseHttp3(app: HttpServer, port: number): void {
  const value = altSvcValue(port);
  app.addHook('onRequest', (request, reply, done) => {
    if (request.protocol === 'https') reply.header('alt-svc', value);
    done();
  });
}
