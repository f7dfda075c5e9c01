// The real `fermata serve`, as tests start it: a child process on the pinned Node, port 0, a
// data directory of the test's, resolved once its "listening" line names the URL. Callers
// track the child to kill it in their own cleanup.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { withTimeout } from './timeout.ts';

export const binPath = fileURLToPath(new URL('../../bin/fermata.js', import.meta.url));
const startTimeoutMs = 20_000;

export interface Service {
  readonly child: ChildProcess;
  readonly url: string;
  readonly port: number;
  readonly exited: Promise<void>;
}

/** The test run's environment without the service's own variables, plus `extra`. */
export function serviceEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  for (const name of ['FERMATA_DATA', 'FERMATA_LISTEN', 'FERMATA_TOKENS']) if (!(name in extra)) delete env[name];
  return env;
}

/** Starts `fermata serve` on `dataDir`; `onSpawn` sees the child at once (to track it for cleanup). */
export async function startService(dataDir: string, onSpawn: (child: ChildProcess) => void = () => undefined): Promise<Service> {
  const child = spawn(process.execPath, [binPath, 'serve', '--data', dataDir, '--listen', '127.0.0.1:0'], { env: serviceEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  onSpawn(child);
  let output = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const listening = new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (text) => {
      output += text + '\n';
      try {
        const line = JSON.parse(text) as { msg?: string; url?: string };
        if (line.msg === 'listening' && typeof line.url === 'string') resolve(line.url);
      } catch {
        // not a log line
      }
    });
    void exited.then(() => reject(new Error(`fermata exited before listening:\n${output}`)));
  });
  try {
    const url = await withTimeout(listening, startTimeoutMs, 'the "listening" line');
    return { child, url, port: Number(new URL(url).port), exited };
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
}
