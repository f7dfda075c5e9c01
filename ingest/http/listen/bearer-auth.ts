// Bearer-token authentication for the HTTP API and Flight. When tokens are configured, every
// route but the health checks and the dashboard's static files (routes/ui.ts: they hold no data)
// needs `authorization: Bearer <token>`; the comparison is
// constant-time (both sides hashed to SHA-256, compared with timingSafeEqual, against every
// configured token without stopping early), so timing says nothing about a token.
//
// Also the rule for where the service may listen: a non-loopback address needs tokens unless
// the operator says --insecure.
import { createHash, timingSafeEqual } from 'node:crypto';
import { BlockList, isIP } from 'node:net';

/** Tokens shorter than this are refused at start-up: they could be guessed. */
export const tokenLengthMin = 16;

const openPaths = new Set(['/healthz', '/readyz', '/ui']);
const openPrefix = '/ui/assets/';

const digest = (token: string): Buffer => createHash('sha256').update(token, 'utf8').digest();

export interface BearerCheck {
  /** True when the request may go on. */
  allows(path: string, authorization: string | undefined): boolean;
}

export function bearerCheck(tokens: readonly string[]): BearerCheck {
  const digests = tokens.map(digest);
  return {
    allows(path, authorization) {
      if (openPaths.has(path) || path.startsWith(openPrefix)) return true;
      if (authorization === undefined || !authorization.startsWith('Bearer ')) return false;
      const presented = digest(authorization.slice('Bearer '.length).trim());
      let match = false;
      for (const known of digests) match = timingSafeEqual(presented, known) || match;
      return match;
    },
  };
}

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  const family = isIP(host);
  if (family === 4) return loopback.check(host, 'ipv4');
  if (family === 6) return loopback.check(host, 'ipv6') || loopback.check(host.replace(/^::ffff:/i, ''), 'ipv4');
  return false;
}

/** Why the service may not listen on `host` with these settings, or undefined when it may. */
export function listenRefusal(host: string, tokens: readonly string[], insecure: boolean): string | undefined {
  if (tokens.length > 0 || insecure || isLoopbackHost(host)) return undefined;
  return `listening on ${host}, which is not a loopback address, needs bearer tokens ("tokens" in the config file, or FERMATA_TOKENS); --insecure serves without them`;
}
