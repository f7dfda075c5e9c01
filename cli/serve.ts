// `fermata serve`: the service process. Settles its settings (flags over environment over
// config file over defaults), opens the WAL (which takes the data directory's lock and
// recovers), serves HTTP/1.1 and h2c on one port, and on SIGTERM or SIGINT drains: stop
// accepting, let open requests finish (at most drainTimeoutMs, then cut), close the WAL
// (flushing queued appends, releasing the lock), exit 0. A second signal exits 1 at once.
//
// Exit codes: 0 stopped cleanly, 1 could not start or stop cleanly (the log says why),
// 2 bad command line or config (stderr says why).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { pino, type Logger } from 'pino';
import { isFermataError } from '../engine/errors.ts';
import { Engine } from '../engine/engine.ts';
import { httpLimits } from '../engine/limits.ts';
import { listenRefusal, tokenLengthMin } from '../ingest/http/bearer-auth.ts';
import { createHttpServer } from '../ingest/http/server.ts';

/** How long a drain may take before the connections still open are cut. */

const { drainTimeoutMs } = httpLimits;
const defaults = { data: './data', listen: '127.0.0.1:7070' } as const;
const configKeys = ['data', 'listen'] as const;
type ConfigKey = (typeof configKeys)[number];
/** Config keys that are not a single string. */
const tokensKey = 'tokens';

const serveUsage = `Usage: fermata serve [--data DIR] [--listen HOST:PORT] [--config FILE] [--insecure]

Runs the timer service: HTTP/1.1 and HTTP/2 (prior knowledge) on one cleartext port.

  --data DIR          data directory (default ${defaults.data}; env FERMATA_DATA)
  --listen HOST:PORT  address to serve on (default ${defaults.listen}; port 0 picks a free
                      one; IPv6 as [::1]:7070; env FERMATA_LISTEN)
  --config FILE       JSON object with the keys "data", "listen" and "tokens" (a relative
                      "data" is taken from the file's directory); the environment and flags
                      override it
  --insecure          serve a non-loopback address without bearer tokens
  -h, --help          this text

Bearer tokens ("tokens": ["…"] in the config file, or FERMATA_TOKENS=a,b): when set, every
route but /healthz and /readyz needs "authorization: Bearer <token>". A non-loopback --listen
refuses to start without them unless --insecure. Tokens are at least ${tokenLengthMin} characters.

Logs are JSON lines on stdout; the line with "msg":"listening" carries the "url" served.
SIGTERM or SIGINT drains open requests (at most ${drainTimeoutMs / 1000} s) and exits 0.
`;

interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

interface ServeSettings {
  readonly dataDir: string;
  readonly listen: ListenAddress;
  readonly tokens: readonly string[];
}

type ServeCommand = { readonly kind: 'help' } | { readonly kind: 'run'; readonly settings: ServeSettings };

/** A bad command line or config file: the message names the source and the problem. */
class UsageError extends Error {
  override readonly name = 'UsageError';
}

export async function serve(argv: readonly string[]): Promise<number> {
  let command: ServeCommand;
  try {
    command = parseServeCommand(argv, process.env);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`fermata serve: ${err.message}\n(fermata serve --help shows the options)\n`);
    return 2;
  }
  if (command.kind === 'help') {
    process.stdout.write(serveUsage);
    return 0;
  }
  // Sync writes: the lines are few (start, stop, errors) and none may be lost to an exit.
  const logger = pino(pino.destination({ dest: 1, sync: true }));
  return runService(command.settings, logger);
}

function parseServeCommand(argv: readonly string[], env: NodeJS.ProcessEnv): ServeCommand {
  const { values } = parseServeArgs(argv);
  if (values.help === true) return { kind: 'help' };

  const configFile = values.config;
  const config = configFile === undefined ? {} : readConfig(configFile);
  /** The winning setting for `key`, where it came from, and the directory a relative path in it is taken from. */
  const pick = (key: ConfigKey, envName: string): { value: string; source: string; base: string } => {
    const flag = values[key];
    if (flag !== undefined) return { value: flag, source: `--${key}`, base: process.cwd() };
    const fromEnv = env[envName];
    if (fromEnv !== undefined && fromEnv !== '') return { value: fromEnv, source: envName, base: process.cwd() };
    const fromConfig = config[key];
    if (fromConfig !== undefined && configFile !== undefined) {
      return { value: fromConfig, source: `config file ${configFile}, "${key}"`, base: dirname(resolve(configFile)) };
    }
    return { value: defaults[key], source: 'the default', base: process.cwd() };
  };

  const data = pick('data', 'FERMATA_DATA');
  if (data.value === '') throw new UsageError(`${data.source}: the data directory must not be empty`);
  const listen = pick('listen', 'FERMATA_LISTEN');
  const listenAddress = parseListenAddress(listen.value, listen.source);
  const fromEnv = env.FERMATA_TOKENS;
  const tokens =
    fromEnv !== undefined && fromEnv !== ''
      ? checkTokens(fromEnv.split(','), 'FERMATA_TOKENS')
      : (config.tokens ?? []);
  const refusal = listenRefusal(listenAddress.host, tokens, values.insecure === true);
  if (refusal !== undefined) throw new UsageError(`${listen.source}: ${refusal}`);
  return { kind: 'run', settings: { dataDir: resolve(data.base, data.value), listen: listenAddress, tokens } };
}

function parseServeArgs(argv: readonly string[]) {
  try {
    return parseArgs({
      args: [...argv],
      options: {
        data: { type: 'string' },
        listen: { type: 'string' },
        config: { type: 'string' },
        insecure: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (err) {
    throw new UsageError(messageOf(err));
  }
}

/** `HOST:PORT` or `[IPv6]:PORT`; port 0 asks the system for a free one. */
function parseListenAddress(text: string, source: string): ListenAddress {
  const match = /^(?:\[([0-9A-Fa-f:.]+(?:%[\w.-]+)?)\]|([^\s:[\]]+)):(\d{1,5})$/.exec(text);
  const port = match === null ? NaN : Number(match[3]);
  if (match === null || port > 65_535) {
    throw new UsageError(`${source}: "${text}" is not HOST:PORT (for example 127.0.0.1:7070, [::1]:7070, 0.0.0.0:0)`);
  }
  return { host: (match[1] ?? match[2]) as string, port };
}

function checkTokens(tokens: readonly unknown[], source: string): string[] {
  const checked: string[] = [];
  for (const token of tokens) {
    if (typeof token !== 'string' || token.trim().length < tokenLengthMin || /\s/.test(token.trim())) {
      throw new UsageError(`${source}: every token must be a string of at least ${tokenLengthMin} characters without spaces`);
    }
    checked.push(token.trim());
  }
  return checked;
}

interface ServeConfig extends Partial<Record<ConfigKey, string>> {
  tokens?: string[];
}

function readConfig(file: string): ServeConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`config file ${file}: cannot read it: ${messageOf(err)}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`config file ${file}: not valid JSON: ${messageOf(err)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new UsageError(`config file ${file}: must hold a JSON object (with the keys ${[...configKeys, tokensKey].join(', ')})`);
  }
  const config: ServeConfig = {};
  for (const [key, entry] of Object.entries(value)) {
    if (key === tokensKey) {
      if (!Array.isArray(entry)) throw new UsageError(`config file ${file}: "tokens" must be an array of strings`);
      config.tokens = checkTokens(entry, `config file ${file}, "tokens"`);
      continue;
    }
    if (!isConfigKey(key)) throw new UsageError(`config file ${file}: unknown key "${key}" (known keys: ${[...configKeys, tokensKey].join(', ')})`);
    if (typeof entry !== 'string') throw new UsageError(`config file ${file}: "${key}" must be a string, not ${JSON.stringify(entry)}`);
    config[key] = entry;
  }
  return config;
}

function isConfigKey(key: string): key is ConfigKey {
  return (configKeys as readonly string[]).includes(key);
}

async function runService(settings: ServeSettings, logger: Logger): Promise<number> {
  // Signals are caught from the start, so that one arriving while the WAL recovers still
  // leads to an orderly stop once it is open.
  const stopRequested = Promise.withResolvers<NodeJS.Signals>();
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      logger.fatal({ signal }, 'second signal while stopping: exiting now');
      process.exit(1);
    }
    stopping = true;
    stopRequested.resolve(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  let engine: Engine;
  try {
    engine = await Engine.open({ dataDir: settings.dataDir, logger: logger.child({ component: 'wal' }) });
  } catch (err) {
    logStartFailure(logger, err, `cannot open the data directory ${settings.dataDir}`);
    return 1;
  }
  const wal = engine.log;
  logger.info({ dir: wal.dir, lastSeq: wal.lastSeq, segments: wal.segmentCount, resident: engine.resident, pending: engine.pending }, 'engine open');

  const app = createHttpServer({ logger: logger.child({ component: 'http' }), engine, tokens: settings.tokens });
  try {
    await app.listen({ host: settings.listen.host, port: settings.listen.port });
  } catch (err) {
    logStartFailure(logger, err, `cannot listen on ${settings.listen.host}:${settings.listen.port}`);
    await app.close().catch(() => undefined);
    await engine.close();
    return 1;
  }
  logger.info({ url: urlOf(app.server.address()), data: settings.dataDir }, 'listening');

  const signal = await stopRequested.promise;
  logger.info({ signal }, 'stopping');
  let exitCode = 0;
  const cut = setTimeout(() => {
    logger.warn({ drainTimeoutMs }, 'connections still open after the drain timeout: closing them');
    app.server.closeAllConnections();
  }, drainTimeoutMs);
  try {
    await app.close();
  } catch (err) {
    logger.error({ err }, 'closing the HTTP server failed');
    exitCode = 1;
  } finally {
    clearTimeout(cut);
  }
  try {
    await engine.close();
  } catch (err) {
    logger.error({ err }, 'closing the engine failed');
    exitCode = 1;
  }
  logger.info({ exitCode }, 'stopped');
  return exitCode;
}

/**
 * Coded conditions (a corrupt WAL, a locked directory) log their message, code and details
 * (file, offset, lock holder); anything else its stack. Details stay nested: a lock holder's
 * `pid` must not be read as this process's.
 */
function logStartFailure(logger: Logger, err: unknown, context: string): void {
  if (isFermataError(err)) logger.fatal({ code: err.code, details: err.details }, err.message);
  else logger.fatal({ err }, `${context}: ${messageOf(err)}`);
}

function urlOf(address: AddressInfo | string | null): string {
  assert.ok(address !== null && typeof address === 'object', 'a TCP listener has an address once listening');
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
