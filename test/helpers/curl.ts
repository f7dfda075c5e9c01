// curl as the tests' real HTTP client: whether this machine's curl exists and speaks HTTP/2 (a
// test without it calls toolOrSkip(t, 'curl') from ./tools.ts), and one request with it, answered
// as status, HTTP version, the final answer's headers and the body's bytes. Every request is
// bounded twice: curl's own --max-time, and a wall-clock timeout in case curl itself hangs.
// Runs on the test's main thread; each request is one curl child.
import { execFile, execFileSync } from 'node:child_process';
import { withTimeout } from './timeout.ts';
import { toolPath } from './tools.ts';

/** Why a test that needs curl's HTTP/2 cannot run with this curl. */
export const curlWithoutHttp2 = 'this curl is built without HTTP/2';

export const curl = (() => {
  const path = toolPath('curl');
  if (path === undefined) return { present: false, http2: false };
  const version = execFileSync(path, ['--version'], { encoding: 'utf8' });
  return { present: true, http2: /^Features:.*\bHTTP2\b/m.test(version) };
})();

/** HTTP/1.1, or HTTP/2 (with prior knowledge on cleartext, by ALPN over TLS). */
export type CurlProtocol = 'http1.1' | 'http2';

export interface CurlRequest {
  readonly url: string;
  /** Default: curl's own choice (GET, or POST with a body). */
  readonly method?: string;
  /** Default: HTTP/1.1. */
  readonly protocol?: CurlProtocol;
  /** Sent as is, through curl's stdin. */
  readonly body?: string | Uint8Array;
  /** Request headers by name; a body without `content-type` is sent as application/json. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Further curl options, before the URL (`--cacert FILE`, `-d @FILE`). */
  readonly flags?: readonly string[];
  /** curl's --max-time, in ms (default 10,000); the wall-clock bound is a little longer. */
  readonly timeoutMs?: number;
}

export interface CurlAnswer {
  readonly status: number;
  /** As curl names it: `1.1`, `2`. */
  readonly httpVersion: string;
  /** The final answer's headers (not an interim 100 Continue's), names in lower case. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

const defaultTimeoutMs = 10_000;
/** How much longer than curl's --max-time the wall clock waits: curl's own timeout is the clearer failure. */
const wallClockSlackMs = 5_000;
/** Written after the body: the status and the version, on a line of their own. */
const trailer = '\n%{http_code} %{http_version}';
const headerEnd = Buffer.from('\r\n\r\n');

/** One request with curl; rejects when curl fails (no connection, --max-time passed) or does not end. */
export function curlRequest(request: CurlRequest): Promise<CurlAnswer> {
  const timeoutMs = request.timeoutMs ?? defaultTimeoutMs;
  const args = ['-s', '-i', '--max-time', String(timeoutMs / 1000), request.protocol === 'http2' ? protocolFlag(request.url) : '--http1.1'];
  if (request.method !== undefined) args.push('-X', request.method);
  const headers = { ...request.headers };
  if (request.body !== undefined) {
    if (!Object.keys(headers).some((name) => name.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
    args.push('--data-binary', '@-');
  }
  for (const [name, value] of Object.entries(headers)) args.push('-H', `${name}: ${value}`);
  args.push(...(request.flags ?? []), '-w', trailer, request.url);
  const answered = new Promise<CurlAnswer>((resolve, reject) => {
    const child = execFile('curl', args, { encoding: 'buffer', maxBuffer: 256 * 1024 * 1024 }, (err, stdout) => (err === null ? resolve(parseOutput(stdout)) : reject(err)));
    child.stdin?.end(request.body === undefined ? undefined : Buffer.from(request.body));
  });
  return withTimeout(answered, timeoutMs + wallClockSlackMs, `curl ${request.method ?? ''} ${request.url}`);
}

/** The answer's body as UTF-8 text. */
export const text = (answer: CurlAnswer): string => answer.body.toString('utf8');

/** The answer's body parsed as JSON (a body that is not JSON throws, naming the status and the body). */
export function json<T = Record<string, unknown>>(answer: CurlAnswer): T {
  try {
    return JSON.parse(text(answer)) as T;
  } catch {
    throw new Error(`answer ${answer.status} is not JSON: ${JSON.stringify(text(answer).slice(0, 200))}`);
  }
}

function protocolFlag(url: string): string {
  return url.startsWith('https:') ? '--http2' : '--http2-prior-knowledge';
}

/** Splits `-i` output with the trailer: header blocks (interim 1xx ones skipped), then the body, then the trailer line. */
function parseOutput(stdout: Buffer): CurlAnswer {
  const cut = stdout.lastIndexOf(0x0a);
  const [status = '0', httpVersion = ''] = stdout.subarray(cut + 1).toString('latin1').split(' ');
  let start = 0;
  let block: string[] = [];
  for (;;) {
    const end = stdout.indexOf(headerEnd, start);
    if (end === -1 || end >= cut) break;
    block = stdout.subarray(start, end).toString('latin1').split('\r\n');
    start = end + headerEnd.length;
    if (!/^HTTP\/\S+ 1\d\d\b/.test(block[0] ?? '')) break;
  }
  const headers: Record<string, string> = {};
  for (const line of block.slice(1)) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(status), httpVersion, headers, body: stdout.subarray(start, cut) };
}
