// The real `fermata serve`, as tests start it: a child process on the pinned Node, port 0, a
// data directory of the test's, resolved once its "listening" line names the URL (and, when the
// test asks for a TLS port, once the second "listening" line names the https:// one). Callers
// track the child to kill it in their own cleanup.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { withTimeout } from './timeout.ts';

export const binPath = fileURLToPath(new URL('../../bin/fermata.js', import.meta.url));
const startTimeoutMs = 20_000;

/** The service's own environment variables: a test run's environment must not leak them into the child. */
const serviceVariables = ['FERMATA_DATA', 'FERMATA_LISTEN', 'FERMATA_TOKENS', 'FERMATA_TLS_CERT', 'FERMATA_TLS_KEY', 'FERMATA_TLS_LISTEN', 'FERMATA_DISPATCH_ALLOW', 'FERMATA_SIGNING_SECRETS', 'FERMATA_MEMORY_BUDGET', 'FERMATA_MEMORY_BUDGET_FLOOR', 'FERMATA_FAR_HORIZON', 'FERMATA_FLIGHT_LISTEN', 'FERMATA_GRPC_LISTEN', 'FERMATA_HTTP3_PORT', 'FERMATA_FAILPOINTS', 'FERMATA_CLOCK', 'FERMATA_CLUSTER_URL', 'FERMATA_CLUSTER_SECRET'];

export interface Service {
  readonly child: ChildProcess;
  readonly url: string;
  readonly port: number;
  /** The TLS port's https:// URL, when the service was started with `tls: true`. */
  readonly tlsUrl: string | undefined;
  readonly exited: Promise<void>;
  /** Everything the child wrote so far, stdout and stderr. */
  output(): string;
}

export interface ServiceOptions {
  /** Options after `serve --data DIR --listen 127.0.0.1:0`. */
  readonly args?: readonly string[];
  /** Variables added to the cleaned environment. */
  readonly env?: Record<string, string>;
  /** Wait for the TLS port's "listening" line too (the arguments must configure one). */
  readonly tls?: boolean;
  /** A command the service runs under, which execs it (so the child's pid is the service's): e.g. `['fiu-run', '-x']`. */
  readonly wrapper?: readonly string[];
}

/** The test run's environment without the service's own variables, plus `extra`. */
export function serviceEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  for (const name of serviceVariables) if (!(name in extra)) delete env[name];
  return env;
}

/** Starts `fermata serve` on `dataDir`; `onSpawn` sees the child at once (to track it for cleanup). */
export async function startService(dataDir: string, onSpawn: (child: ChildProcess) => void = () => undefined, options: ServiceOptions = {}): Promise<Service> {
  const args = [binPath, 'serve', '--data', dataDir, '--listen', '127.0.0.1:0', ...(options.args ?? [])];
  const [command, ...wrapperArgs] = [...(options.wrapper ?? []), process.execPath];
  const child = spawn(command as string, [...wrapperArgs, ...args], { env: serviceEnv(options.env), stdio: ['ignore', 'pipe', 'pipe'] });
  onSpawn(child);
  let output = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const urls: string[] = [];
  const wanted = options.tls === true ? 2 : 1;
  const listening = new Promise<string[]>((resolve, reject) => {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (text) => {
      output += text + '\n';
      try {
        const line = JSON.parse(text) as { msg?: string; url?: string };
        if (line.msg === 'listening' && typeof line.url === 'string' && urls.push(line.url) === wanted) resolve(urls);
      } catch {
        // not a log line
      }
    });
    void exited.then(() => reject(new Error(`fermata exited before listening:\n${output}`)));
  });
  try {
    const [url, tlsUrl] = await withTimeout(listening, startTimeoutMs, 'the "listening" line');
    if (url === undefined || !url.startsWith('http://')) throw new Error(`the first "listening" line names the cleartext port, not ${url}`);
    if (options.tls === true && (tlsUrl === undefined || !tlsUrl.startsWith('https://'))) throw new Error(`the second "listening" line names the TLS port, not ${tlsUrl}`);
    return { child, url, port: Number(new URL(url).port), tlsUrl, exited, output: () => output };
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
}

/** The service's Flight URL (grpc+tcp://…), from its "flight listening" log line. */
export async function flightUrl(service: Service): Promise<string> {
  return withTimeout(
    (async () => {
      for (;;) {
        const match = /"url":"(grpc\+tcp:\/\/[^"]+)","msg":"flight listening"/.exec(service.output());
        if (match !== null) return match[1] as string;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })(),
    10_000,
    'the "flight listening" line',
  );
}
