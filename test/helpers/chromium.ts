// Headless Chromium (Debian chromium) as an HTTP client no one here wrote, for the HTTP/3 test
// and the http3 benchmark: a child process with its own profile directory, trusting one
// self-signed certificate by its SPKI hash, driven over the Chrome DevTools Protocol on one page
// (`Page.evaluate` runs an expression in the page and returns its value as JSON). Also the small
// waits and the free TCP+UDP port the HTTP/3 set-ups need. The caller owns the child: it sees it
// through `onSpawn` at once and kills it when done.
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { withTimeout } from './timeout.ts';

const limits = {
  /** Chromium must print its DevTools endpoint within this. */
  devtoolsWaitMs: 30_000,
  /** The first page must have loaded within this. */
  pageLoadWaitMs: 20_000,
  /** Default bound on one Runtime.evaluate (a long-running one passes its own). */
  evaluateWaitMs: 20_000,
  /** How often `waitFor` checks. */
  pollMs: 50,
} as const;

/** A port free for both TCP and UDP a moment ago (Caddy binds both; port 0 cannot be used). */
export async function freePort(): Promise<number> {
  for (;;) {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const udp = createSocket('udp4');
    const free = await new Promise<boolean>((resolve) => {
      udp.once('error', () => resolve(false));
      udp.bind(port, '127.0.0.1', () => resolve(true));
    });
    udp.close();
    if (free) return port;
  }
}

/** Resolves once `check` holds, polling; fails naming `what` after `timeoutMs`. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  await withTimeout(
    (async () => {
      while (!(await check())) await new Promise((resolve) => setTimeout(resolve, limits.pollMs));
    })(),
    timeoutMs,
    what,
  );
}

/** The base64 SHA-256 of a certificate's public key: what --ignore-certificate-errors-spki-list takes. */
export function spkiHash(certFile: string): string {
  const der = new X509Certificate(readFileSync(certFile)).publicKey.export({ type: 'spki', format: 'der' });
  return createHash('sha256').update(der).digest('base64');
}

interface ProtocolMessage {
  readonly id?: number;
  readonly result?: unknown;
  readonly error?: { readonly message: string };
}

/** A minimal Chrome DevTools Protocol session on one page target. */
export class Page {
  readonly #socket: WebSocket;
  #nextId = 1;
  readonly #pending = new Map<number, (message: ProtocolMessage) => void>();

  private constructor(socket: WebSocket) {
    this.#socket = socket;
    socket.addEventListener('message', (event) => {
      const message = JSON.parse(String(event.data)) as ProtocolMessage;
      if (message.id !== undefined) this.#pending.get(message.id)?.(message);
    });
  }

  static async open(debuggerUrl: string): Promise<Page> {
    const socket = new WebSocket(debuggerUrl);
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener('open', () => resolve());
      socket.addEventListener('error', () => reject(new Error(`cannot connect to ${debuggerUrl}`)));
    });
    return new Page(socket);
  }

  /** The value of an expression (a promise is awaited), as JSON; fails after `timeoutMs`. */
  async evaluate<T>(expression: string, timeoutMs: number = limits.evaluateWaitMs): Promise<T> {
    const id = this.#nextId++;
    const answer = new Promise<ProtocolMessage>((resolve) => this.#pending.set(id, resolve));
    this.#socket.send(JSON.stringify({ id, method: 'Runtime.evaluate', params: { expression, awaitPromise: true, returnByValue: true } }));
    try {
      const message = await withTimeout(answer, timeoutMs, `Runtime.evaluate ${expression.slice(0, 60)}`);
      if (message.error !== undefined) throw new Error(message.error.message);
      const result = message.result as { result: { value: T }; exceptionDetails?: { text: string; exception?: { description?: string } } };
      if (result.exceptionDetails !== undefined) throw new Error(result.exceptionDetails.exception?.description ?? result.exceptionDetails.text);
      return result.result.value;
    } finally {
      this.#pending.delete(id);
    }
  }

  close(): void {
    this.#socket.close();
  }
}

export interface ChromiumOptions {
  /** The page opened (and loaded) first: its origin is where same-origin fetch() goes. */
  readonly url: string;
  /** A fresh profile directory (the caller's to remove). */
  readonly profileDir: string;
  /** The SPKI hash (spkiHash) of the one self-signed certificate to trust. */
  readonly trustSpki: string;
  /** More switches: `--origin-to-force-quic-on=HOST:PORT` for HTTP/3, `--disable-quic` to keep it off. */
  readonly flags?: readonly string[];
  /** Sees the child as soon as it is spawned, so the caller can kill it whatever happens next. */
  readonly onSpawn?: (browser: ChildProcess) => void;
}

/** The switch that makes Chromium use QUIC for `origin` (host:port) from the first request, without waiting for alt-svc. */
export function forceQuicFlag(origin: string): string {
  return `--origin-to-force-quic-on=${origin}`;
}

/** Headless Chromium with its page loaded at `options.url`. */
export async function openChromium(options: ChromiumOptions): Promise<{ browser: ChildProcess; page: Page }> {
  const args = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--remote-debugging-port=0', `--user-data-dir=${options.profileDir}`, `--ignore-certificate-errors-spki-list=${options.trustSpki}`, ...(options.flags ?? []), 'about:blank'];
  const browser = spawn('chromium', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  options.onSpawn?.(browser);
  let stderr = '';
  let listening = false;
  const endpoint = await withTimeout(
    new Promise<string>((resolve, reject) => {
      // Read stderr to its end (a full pipe would stall Chromium), keeping it only up to the endpoint.
      browser.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
        if (listening) return;
        stderr += chunk;
        const match = /DevTools listening on (ws:\/\/\S+)/.exec(stderr);
        if (match === null) return;
        listening = true;
        resolve(match[1] as string);
      });
      browser.once('exit', (code) => reject(new Error(`chromium exited ${code}: ${stderr}`)));
    }),
    limits.devtoolsWaitMs,
    'chromium to listen for DevTools',
  );
  const devtools = new URL(endpoint);
  const created = await fetch(`http://${devtools.host}/json/new?${options.url}`, { method: 'PUT' });
  const target = (await created.json()) as { webSocketDebuggerUrl: string };
  const page = await Page.open(target.webSocketDebuggerUrl);
  await waitFor('the page to load', async () => (await page.evaluate<string>('location.href + " " + document.readyState')) === `${options.url} complete`, limits.pageLoadWaitMs);
  return { browser, page };
}
