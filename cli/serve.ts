// `fermata serve`: the service process. Settles its settings (flags over environment over
// config file over defaults), opens the WAL (which takes the data directory's lock and
// recovers), serves HTTP/1.1 and h2c on one port (and h2 or HTTP/1.1 by ALPN on a TLS port when
// given a certificate), delivers due timers through the dispatcher's worker threads, and on
// SIGTERM or SIGINT drains: stop accepting on both ports, let open requests finish (at most
// drainTimeoutMs, then cut), let deliveries in flight be recorded (bounded), close the WAL
// (flushing queued appends, releasing the lock), exit 0. A second signal exits 1 at once. A
// poisoned log (a failed write or fdatasync) ends one life of the engine: the next opens the
// data directory again, as a restart would, and takes over the same ports.
//
// Exit codes: 0 stopped cleanly, 1 could not start or stop cleanly (the log says why),
// 2 bad command line or config (stderr says why).
import assert from 'node:assert/strict';
import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createSecureContext } from 'node:tls';
import { dirname, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { pino, type Logger } from 'pino';
import { type FermataError, isFermataError } from '../engine/errors.ts';
import { Engine, systemClock } from '../engine/engine.ts';
import { registerDispatchMetrics } from '../dispatch/dispatch-metrics.ts';
import { Dispatcher } from '../dispatch/dispatcher.ts';
import type { PullQueues } from '../dispatch/pull-queues.ts';
import { TargetGuard } from '../dispatch/target-guard.ts';
import { DispatchConfigError, type DispatchSettings, parseDispatchSettings } from './dispatch-config.ts';
import { httpLimits, memoryLimits, readinessLimits, serviceLimits } from '../engine/limits.ts';
import { memoryBudget, residentSlotsFor } from '../engine/memory-budget.ts';
import { MemoryLoader } from '../engine/spill/memory-loader.ts';
import { isLoopbackHost, listenRefusal, tokenLengthMin } from '../ingest/http/bearer-auth.ts';
import { DiskSpaceCheck } from '../ingest/http/disk-space.ts';
import { createHttpServer, type HttpServer } from '../ingest/http/server.ts';
import { type FlightListener, FlightService } from '../ingest/flight/flight-service.ts';
import { advertiseHttp3 } from '../ingest/http3/alt-svc.ts';
import { CaddyMissingError, CaddySupervisor, checkCaddyInstalled } from '../ingest/http3/caddy-supervisor.ts';
import { SelfSignedError, selfSignedPair } from '../ingest/http3/self-signed.ts';
import { alpnProtocols, type TlsCredentials } from '../ingest/http/tls-listener.ts';
import { parseDurationMs } from './duration.ts';
import { memoryReturn } from './garbage-collector.ts';
import { mallocTrim } from './malloc-trim.ts';

/** How long a drain may take before the connections still open are cut. */
const { drainTimeoutMs } = httpLimits;
const defaults = { data: './data', listen: '127.0.0.1:7070' } as const;
/** The TLS port when --tls-listen is not given and the cleartext port is not 0. */
const tlsPortDefault = 7443;
const farHorizonDefaultText = `${memoryLimits.farHorizonMs / 60_000}m`;
const farHorizonMinText = `${memoryLimits.promoteLeadMs / 60_000}m`;

const configKeys = ['data', 'listen', 'tokens', 'tls', 'readiness', 'dispatch', 'memory_budget', 'far_horizon', 'flight'] as const;
const flightConfigKeys = ['listen'] as const;
const tlsConfigKeys = ['cert', 'key', 'listen'] as const;
const readinessConfigKeys = ['disk_free_bytes_min'] as const;

const serveUsage = `Usage: fermata serve [--data DIR] [--listen HOST:PORT] [--config FILE] [--insecure]
                    [--tls-cert FILE --tls-key FILE [--tls-listen HOST:PORT]] [--flight HOST:PORT]
                    [--http3 PORT]

Runs the timer service: HTTP/1.1 and HTTP/2 (prior knowledge) on one cleartext port, and with
a certificate also a TLS port where ALPN picks HTTP/2 or HTTP/1.1.

  --data DIR              data directory (default ${defaults.data}; env FERMATA_DATA)
  --listen HOST:PORT      address to serve on (default ${defaults.listen}; port 0 picks a free
                          one; IPv6 as [::1]:7070; env FERMATA_LISTEN)
  --config FILE           JSON object of settings (below; relative paths in it are taken
                          from the file's directory); the environment and flags override it
  --insecure              serve a non-loopback address without bearer tokens
  --tls-cert FILE         PEM certificate (chain) for the TLS port (env FERMATA_TLS_CERT)
  --tls-key FILE          PEM private key of that certificate (env FERMATA_TLS_KEY)
  --tls-listen HOST:PORT  address of the TLS port (env FERMATA_TLS_LISTEN; default: the
                          --listen host, port 0 when --listen has port 0, else ${tlsPortDefault})
  --memory-budget BYTES   memory the service may use (e.g. 512MiB, 4GiB; env
                          FERMATA_MEMORY_BUDGET); the cgroup limit and the machine's RAM apply
                          too. Timers beyond what fits are kept on disk until they near.
  --far-horizon D         timers due further ahead than D (e.g. 30m, 1h, 2d; at least
                          ${farHorizonMinText}) are moved to disk once adds and deliveries go quiet,
                          whatever the budget; "off" keeps them in memory while the budget
                          allows (default ${farHorizonDefaultText}; env FERMATA_FAR_HORIZON)
  --flight HOST:PORT      also serve Arrow Flight (gRPC, cleartext) there: DoPut of record batches
                          to ["timers"] or ["timers", QUEUE]; DoGet of a "pull" queue's due timers,
                          settled by DoAction ack/nack (env FERMATA_FLIGHT_LISTEN)
  --http3 PORT            also serve HTTP/3 (QUIC, UDP) on PORT of the TLS port's host through a
                          supervised Caddy (Debian package caddy) that forwards to the cleartext
                          port over h2c; the TLS port advertises it (alt-svc). Without
                          --tls-cert/--tls-key a self-signed pair is made in DIR/http3 for local
                          use (env FERMATA_HTTP3_PORT)
  -h, --help              this text

Config file: {"data": DIR, "listen": HOST:PORT, "tokens": ["…"],
  "tls": {"cert": FILE, "key": FILE, "listen": HOST:PORT}, "flight": {"listen": HOST:PORT},
  "readiness": {"disk_free_bytes_min": BYTES}, "memory_budget": BYTES, "far_horizon": D,
  "dispatch": {"threads": N, "allow": ["https://hooks.internal", "10.1.0.0/16"],
               "signing_secrets": ["whsec_…"], "ca_file": FILE}}; every key is optional.

Delivery: due timers are POSTed to their targets by N worker threads (default: cores − 1).
Targets at private, loopback, link-local or metadata addresses are refused unless "allow"
lists them (origins or CIDRs; env FERMATA_DISPATCH_ALLOW=a,b); loopback is allowed when the
service itself listens on loopback. With "signing_secrets" (env FERMATA_SIGNING_SECRETS=a,b)
every delivery carries Standard Webhooks signatures, one per secret.

Bearer tokens ("tokens" in the config file, or FERMATA_TOKENS=a,b): when set, every route but
/healthz and /readyz needs "authorization: Bearer <token>". A non-loopback --listen or
--tls-listen refuses to start without them unless --insecure. Tokens are at least
${tokenLengthMin} characters.

/readyz answers 503 while the log is poisoned, and while the data directory's file system has
fewer bytes free than "readiness"."disk_free_bytes_min" (default ${readinessLimits.diskFreeBytesMin});
adds are then refused (507 DISK_FULL), keeping the space left for cancels and delivery outcomes.
A failed write or fdatasync poisons the log: the service opens the data directory again at once
(recovery re-reads the disk), retrying every few seconds while that fails, on the same ports.

Logs are JSON lines on stdout; the line with "msg":"listening" carries the "url" served
(http://…), and with a TLS port a second such line follows with its https:// "url".
SIGTERM or SIGINT drains open requests on both ports (at most ${drainTimeoutMs / 1000} s) and exits 0.
`;

interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

interface TlsSettings {
  readonly credentials: TlsCredentials;
  readonly listen: ListenAddress;
}

interface ServeSettings {
  readonly dataDir: string;
  readonly listen: ListenAddress;
  readonly tokens: readonly string[];
  readonly tls: TlsSettings | undefined;
  readonly diskFreeBytesMin: number;
  readonly dispatch: DispatchSettings;
  /** --memory-budget in bytes, when set. */
  readonly memoryBudgetBytes: number | undefined;
  /** --far-horizon in ms (Infinity: off). */
  readonly farHorizonMs: number;
  /** Where the Arrow Flight service listens, when it is on. */
  readonly flight: ListenAddress | undefined;
  /** The HTTP/3 port and the certificate files Caddy loads, when --http3 is on. */
  readonly http3: { readonly port: number; readonly certFile: string; readonly keyFile: string } | undefined;
}

/** A setting as chosen: its text, where it came from (for messages), and the directory a relative path in it is taken from. */
interface Setting {
  readonly value: string;
  readonly source: string;
  readonly base: string;
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
  /** The winning setting for option `--name`: flag, else environment variable, else config file entry, else none. */
  const pick = (name: 'data' | 'listen' | 'tls-cert' | 'tls-key' | 'tls-listen' | 'flight', envName: string, configName: string, fromConfig: string | undefined): Setting | undefined => {
    const flag = values[name];
    if (flag !== undefined) return { value: flag, source: `--${name}`, base: process.cwd() };
    const fromEnv = env[envName];
    if (fromEnv !== undefined && fromEnv !== '') return { value: fromEnv, source: envName, base: process.cwd() };
    if (fromConfig !== undefined && configFile !== undefined) {
      return { value: fromConfig, source: `config file ${configFile}, "${configName}"`, base: dirname(resolve(configFile)) };
    }
    return undefined;
  };
  const byDefault = (value: string): Setting => ({ value, source: 'the default', base: process.cwd() });

  const data = pick('data', 'FERMATA_DATA', 'data', config.data) ?? byDefault(defaults.data);
  if (data.value === '') throw new UsageError(`${data.source}: the data directory must not be empty`);
  const listen = pick('listen', 'FERMATA_LISTEN', 'listen', config.listen) ?? byDefault(defaults.listen);
  const listenAddress = parseListenAddress(listen.value, listen.source);
  const fromEnv = env.FERMATA_TOKENS;
  const tokens =
    fromEnv !== undefined && fromEnv !== ''
      ? checkTokens(fromEnv.split(','), 'FERMATA_TOKENS')
      : (config.tokens ?? []);
  const insecure = values.insecure === true;
  const refusal = listenRefusal(listenAddress.host, tokens, insecure);
  if (refusal !== undefined) throw new UsageError(`${listen.source}: ${refusal}`);

  const http3Port = http3PortSetting(values.http3, env.FERMATA_HTTP3_PORT);
  let certSetting = pick('tls-cert', 'FERMATA_TLS_CERT', 'tls.cert', config.tls?.cert);
  let keySetting = pick('tls-key', 'FERMATA_TLS_KEY', 'tls.key', config.tls?.key);
  if (http3Port !== undefined && certSetting === undefined && keySetting === undefined) {
    const pair = http3SelfSigned(resolve(data.base, data.value));
    certSetting = { value: pair.certFile, source: 'the self-signed certificate made for --http3', base: process.cwd() };
    keySetting = { value: pair.keyFile, source: 'the self-signed key made for --http3', base: process.cwd() };
  }
  const tls = tlsSettings(certSetting, keySetting, pick('tls-listen', 'FERMATA_TLS_LISTEN', 'tls.listen', config.tls?.listen), listenAddress);
  if (tls !== undefined) {
    const tlsRefusal = listenRefusal(tls.listen.host, tokens, insecure);
    if (tlsRefusal !== undefined) throw new UsageError(`the TLS port: ${tlsRefusal}`);
  }
  const flight = pick('flight', 'FERMATA_FLIGHT_LISTEN', 'flight.listen', config.flight?.listen);
  const flightAddress = flight === undefined ? undefined : parseListenAddress(flight.value, flight.source);
  const flightRefusal = flightAddress === undefined ? undefined : listenRefusal(flightAddress.host, tokens, insecure);
  if (flight !== undefined && flightRefusal !== undefined) throw new UsageError(`${flight.source}: ${flightRefusal}`);
  return {
    kind: 'run',
    settings: {
      dataDir: resolve(data.base, data.value),
      listen: listenAddress,
      tokens,
      tls,
      diskFreeBytesMin: config.readiness?.disk_free_bytes_min ?? readinessLimits.diskFreeBytesMin,
      dispatch: dispatchSettings(config.dispatch, configFile, env),
      memoryBudgetBytes: memoryBudgetSetting(values['memory-budget'], env.FERMATA_MEMORY_BUDGET, config.memory_budget),
      farHorizonMs: farHorizonSetting(values['far-horizon'], env.FERMATA_FAR_HORIZON, config.far_horizon, configFile),
      flight: flightAddress,
      http3:
        http3Port === undefined || certSetting === undefined || keySetting === undefined
          ? undefined
          : { port: http3Port, certFile: resolve(certSetting.base, certSetting.value), keyFile: resolve(keySetting.base, keySetting.value) },
    },
  };
}

/** --http3 PORT, else FERMATA_HTTP3_PORT; Caddy must be installed (checked here, so a missing one is a usage error naming the package). */
function http3PortSetting(flag: string | undefined, fromEnv: string | undefined): number | undefined {
  const [text, source] = flag !== undefined ? [flag, '--http3'] : fromEnv !== undefined && fromEnv !== '' ? [fromEnv, 'FERMATA_HTTP3_PORT'] : [undefined, ''];
  if (text === undefined) return undefined;
  const port = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  // Caddy binds TCP and UDP separately: port 0 would give each its own port, and no one could say which.
  if (!(port >= 1 && port <= 65_535)) throw new UsageError(`${source}: "${text}" is not a port from 1 to 65535`);
  try {
    checkCaddyInstalled();
  } catch (err) {
    if (err instanceof CaddyMissingError) throw new UsageError(`${source}: ${err.message}`);
    throw err;
  }
  return port;
}

function http3SelfSigned(dataDir: string): { certFile: string; keyFile: string } {
  try {
    return selfSignedPair(resolve(dataDir, 'http3'));
  } catch (err) {
    if (err instanceof SelfSignedError) throw new UsageError(`--http3: ${err.message}`);
    throw err;
  }
}

/** --memory-budget, else FERMATA_MEMORY_BUDGET, else the config file's "memory_budget", in bytes. */
function memoryBudgetSetting(flag: string | undefined, fromEnv: string | undefined, fromConfig: number | undefined): number | undefined {
  const [text, source] = flag !== undefined ? [flag, '--memory-budget'] : fromEnv !== undefined && fromEnv !== '' ? [fromEnv, 'FERMATA_MEMORY_BUDGET'] : [undefined, ''];
  if (text === undefined) return fromConfig;
  const bytes = parseByteSize(text);
  if (bytes === undefined) throw new UsageError(`${source}: "${text}" is not a size in bytes (a whole number, optionally with KiB, MiB or GiB)`);
  return bytes;
}

/**
 * --far-horizon, else FERMATA_FAR_HORIZON, else the config file's "far_horizon", in ms; "off"
 * is Infinity. Never inside the promotion lead: the loader would spill what it must keep.
 */
function farHorizonSetting(flag: string | undefined, fromEnv: string | undefined, fromConfig: string | undefined, configFile: string | undefined): number {
  const [text, source] =
    flag !== undefined ? [flag, '--far-horizon'] : fromEnv !== undefined && fromEnv !== '' ? [fromEnv, 'FERMATA_FAR_HORIZON'] : fromConfig !== undefined ? [fromConfig, `config file ${configFile}, "far_horizon"`] : [undefined, ''];
  if (text === undefined) return memoryLimits.farHorizonMs;
  if (text.trim() === 'off') return Infinity;
  const ms = parseDurationMs(text);
  if (ms === undefined || ms < memoryLimits.promoteLeadMs) {
    throw new UsageError(`${source}: "${text}" is not a duration of at least ${farHorizonMinText} (a number and a unit: ms s m h d, such as 1h or 2d), nor "off"`);
  }
  return ms;
}

const byteUnits: Record<string, number> = { '': 1, b: 1, k: 1024, kb: 1024, kib: 1024, m: 1024 ** 2, mb: 1024 ** 2, mib: 1024 ** 2, g: 1024 ** 3, gb: 1024 ** 3, gib: 1024 ** 3 };

function parseByteSize(text: string): number | undefined {
  const match = /^(\d+)\s*([a-z]*)$/i.exec(text.trim());
  const unit = match === null ? undefined : byteUnits[(match[2] as string).toLowerCase()];
  if (match === null || unit === undefined) return undefined;
  const bytes = Number(match[1]) * unit;
  return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : undefined;
}

function dispatchSettings(entry: unknown, configFile: string | undefined, env: NodeJS.ProcessEnv): DispatchSettings {
  try {
    return parseDispatchSettings(entry, configFile, env, configFile === undefined ? process.cwd() : dirname(resolve(configFile)));
  } catch (err) {
    if (err instanceof DispatchConfigError) throw new UsageError(err.message);
    throw err;
  }
}

/** The TLS port's settings, or undefined when none of its options is set; both files are read and checked here. */
function tlsSettings(cert: Setting | undefined, key: Setting | undefined, listen: Setting | undefined, cleartext: ListenAddress): TlsSettings | undefined {
  if (cert === undefined && key === undefined) {
    if (listen !== undefined) throw new UsageError(`${listen.source}: a TLS port needs a certificate and its key (--tls-cert FILE --tls-key FILE)`);
    return undefined;
  }
  if (cert === undefined || key === undefined) {
    const given = (cert ?? key) as Setting;
    throw new UsageError(`${given.source}: a TLS port needs both a certificate and its key (--tls-cert FILE --tls-key FILE)`);
  }
  const address =
    listen === undefined
      ? { host: cleartext.host, port: cleartext.port === 0 ? 0 : tlsPortDefault }
      : parseListenAddress(listen.value, listen.source);
  return { credentials: readTlsCredentials(cert, key), listen: address };
}

/**
 * Reads the certificate and key files and checks them the way a handshake would need them, so
 * a bad file stops the start with a message naming it, before anything binds.
 */
function readTlsCredentials(certSetting: Setting, keySetting: Setting): TlsCredentials {
  const certFile = resolve(certSetting.base, certSetting.value);
  const keyFile = resolve(keySetting.base, keySetting.value);
  const cert = readSettingFile(certSetting, certFile);
  const key = readSettingFile(keySetting, keyFile);
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(cert);
  } catch (err) {
    throw new UsageError(`${certSetting.source} ${certFile}: not a PEM certificate: ${messageOf(err)}`);
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key);
  } catch (err) {
    throw new UsageError(`${keySetting.source} ${keyFile}: not a PEM private key: ${messageOf(err)}`);
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    throw new UsageError(`${keySetting.source} ${keyFile}: this key does not belong to the certificate in ${certFile}`);
  }
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    throw new UsageError(`${certSetting.source} ${certFile} with ${keySetting.source} ${keyFile}: TLS cannot use them: ${messageOf(err)}`);
  }
  return { cert, key };
}

function readSettingFile(setting: Setting, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new UsageError(`${setting.source} ${file}: cannot read it: ${messageOf(err)}`);
  }
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
        'tls-cert': { type: 'string' },
        'tls-key': { type: 'string' },
        'tls-listen': { type: 'string' },
        'memory-budget': { type: 'string' },
        'far-horizon': { type: 'string' },
        flight: { type: 'string' },
        http3: { type: 'string' },
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

interface ServeConfig {
  data?: string;
  listen?: string;
  tokens?: string[];
  tls?: { cert?: string; key?: string; listen?: string };
  readiness?: { disk_free_bytes_min?: number };
  dispatch?: unknown;
  memory_budget?: number;
  far_horizon?: string;
  flight?: { listen?: string };
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
  const entries = objectEntries(value, file, '', configKeys);
  const config: ServeConfig = {};
  for (const [key, entry] of entries) {
    switch (key) {
      case 'data':
      case 'listen':
        config[key] = configString(entry, file, key);
        break;
      case 'tokens':
        if (!Array.isArray(entry)) throw new UsageError(`config file ${file}: "tokens" must be an array of strings`);
        config.tokens = checkTokens(entry, `config file ${file}, "tokens"`);
        break;
      case 'tls':
        config.tls = {};
        for (const [tlsKey, tlsEntry] of objectEntries(entry, file, 'tls.', tlsConfigKeys)) config.tls[tlsKey] = configString(tlsEntry, file, `tls.${tlsKey}`);
        break;
      case 'flight':
        config.flight = {};
        for (const [flightKey, flightEntry] of objectEntries(entry, file, 'flight.', flightConfigKeys)) config.flight[flightKey] = configString(flightEntry, file, `flight.${flightKey}`);
        break;
      case 'dispatch':
        // Checked whole with the environment's overrides (cli/dispatch-config.ts).
        config.dispatch = entry;
        break;
      case 'memory_budget':
        if (typeof entry !== 'number' || !Number.isSafeInteger(entry) || entry <= 0) {
          throw new UsageError(`config file ${file}: "memory_budget" must be a whole number of bytes > 0, not ${JSON.stringify(entry)}`);
        }
        config.memory_budget = entry;
        break;
      case 'far_horizon':
        config.far_horizon = configString(entry, file, key);
        break;
      case 'readiness':
        config.readiness = {};
        for (const [readinessKey, bytes] of objectEntries(entry, file, 'readiness.', readinessConfigKeys)) {
          if (typeof bytes !== 'number' || !Number.isSafeInteger(bytes) || bytes < 0) {
            throw new UsageError(`config file ${file}: "readiness.${readinessKey}" must be a whole number of bytes ≥ 0, not ${JSON.stringify(bytes)}`);
          }
          config.readiness[readinessKey] = bytes;
        }
        break;
    }
  }
  return config;
}

/** The entries of a config object (the file itself, or the object at `prefix`), each key one of `known`. */
function objectEntries<K extends string>(value: unknown, file: string, prefix: string, known: readonly K[]): [K, unknown][] {
  const where = prefix === '' ? 'must hold a JSON object' : `"${prefix.slice(0, -1)}" must be a JSON object`;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new UsageError(`config file ${file}: ${where} (with the keys ${known.join(', ')})`);
  }
  return Object.entries(value).map(([key, entry]): [K, unknown] => {
    if (!(known as readonly string[]).includes(key)) throw new UsageError(`config file ${file}: unknown key "${prefix}${key}" (known keys: ${known.map((name) => prefix + name).join(', ')})`);
    return [key as K, entry];
  });
}

function configString(entry: unknown, file: string, name: string): string {
  if (typeof entry !== 'string') throw new UsageError(`config file ${file}: "${name}" must be a string, not ${JSON.stringify(entry)}`);
  return entry;
}

/**
 * One life of the service on an opened engine: the loader, the dispatcher, the HTTP adapter and
 * the Flight service built on it. A poisoned log ends a life; the next opens the data directory
 * again (recovery re-reads the disk, as after a crash) and serves on the same ports.
 */
interface Life {
  readonly engine: Engine;
  readonly loader: MemoryLoader;
  readonly dispatcher: Dispatcher;
  readonly app: HttpServer;
  readonly flight: FlightListener | undefined;
}

/** Where a life listens: the settings' addresses, or after the first life the ports it was given (port 0 picks once). */
interface Ports {
  readonly listen: ListenAddress;
  readonly tls: ListenAddress | undefined;
  readonly flight: ListenAddress | undefined;
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

  // Loopback targets are fine for a service that only listens on loopback (a local setup); a
  // port anyone else can reach must not let them ask it to POST to this machine's own services.
  const allowLoopback = isLoopbackHost(settings.listen.host) && (settings.tls === undefined || isLoopbackHost(settings.tls.listen.host));
  const guard = new TargetGuard({ allow: settings.dispatch.allow, allowLoopback });
  // One reading of the free space for every life: /readyz and the adds' gate.
  const disk = new DiskSpaceCheck({ dir: settings.dataDir, freeBytesMin: settings.diskFreeBytesMin, checkIntervalMs: readinessLimits.diskCheckIntervalMs });
  // Read before the engine opens: it sizes the store's slot limit.
  const budget = memoryBudget(settings.memoryBudgetBytes);
  let poisoned = Promise.withResolvers<FermataError>();
  const openEngine = (): Promise<Engine> => {
    const thisLife = Promise.withResolvers<FermataError>();
    poisoned = thisLife;
    return Engine.open({
      dataDir: settings.dataDir,
      // Slots as the budget allows (a past life with a larger one may have let in more: they
      // all come back, and the limit rises to them).
      store: { capacityMax: residentSlotsFor(budget.bytes) },
      logger: logger.child({ component: 'wal' }),
      checkTarget: (target) => guard.checkTargetAtAdmit(target),
      admitGate: () => disk.admitRefusal(),
      onLogPoisoned: (poison) => thisLife.resolve(poison),
    });
  };

  let engine: Engine;
  try {
    engine = await openEngine();
  } catch (err) {
    logStartFailure(logger, err, `cannot open the data directory ${settings.dataDir}`);
    return 1;
  }
  // The adds' gate answers from the last reading: take the first one before serving.
  await disk.verdict();
  logger.info(
    {
      budgetBytes: budget.bytes,
      source: budget.source,
      limitBytes: budget.limitBytes,
      residentMax: engine.stats().residentMax,
      farHorizonMs: Number.isFinite(settings.farHorizonMs) ? settings.farHorizonMs : null,
      // glibc's malloc_trim, through node:ffi (experimental in Node 26): freed memory goes back to the kernel.
      mallocTrim: mallocTrim() !== undefined,
    },
    'memory budget',
  );
  const firstPorts: Ports = { listen: settings.listen, tls: settings.tls?.listen, flight: settings.flight };
  let life = await startLife(settings, engine, firstPorts, disk, allowLoopback, logger);
  if (life === undefined) return 1;
  const ports = portsOf(life, firstPorts);
  const caddy = await startHttp3(settings, life.app, logger);
  if (caddy === 'failed') {
    await stopLife(life, logger);
    return 1;
  }

  for (;;) {
    const ended = await Promise.race([stopRequested.promise, poisoned.promise]);
    if (typeof ended === 'string') {
      logger.info({ signal: ended }, 'stopping');
      // Caddy first: it stops taking HTTP/3 requests and finishes those in flight while fermata still answers them.
      await caddy?.stop();
      const exitCode = await stopLife(life, logger);
      logger.info({ exitCode }, 'stopped');
      return exitCode;
    }
    // The old life's ports stay open meanwhile: its adds are answered 503/507 from the poison
    // (Retry-After), its reads from memory, until the next life can take over.
    logger.error({ poison: ended.message }, 'the log is poisoned: opening the data directory again (recovery re-reads the disk)');
    await stopDelivering(life);
    // A full disk: the same writes would fail again at once, so the directory is opened again
    // only once there is room (the old life answers 507 meanwhile, its ports open).
    const roomNeeded = ended.details.cause === 'ENOSPC' ? Math.max(settings.diskFreeBytesMin, serviceLimits.reopenFreeBytesMin) : 0;
    const hasRoom = async (): Promise<string | undefined> => {
      if (roomNeeded === 0) return undefined;
      const verdict = await disk.fresh();
      return verdict.freeBytes !== undefined && verdict.freeBytes >= roomNeeded ? undefined : `waiting for ${roomNeeded} bytes free (${verdict.freeBytes ?? 'unknown'} now)`;
    };
    const next = await reopen(life.engine, hasRoom, openEngine, stopRequested.promise, logger);
    if (next === undefined) {
      logger.info('stopping');
      await caddy?.stop();
      const exitCode = await stopServing(life, logger);
      await life.engine.close().catch(() => undefined);
      logger.info({ exitCode }, 'stopped');
      return exitCode;
    }
    const old = life;
    const draining = stopServing(old, logger);
    await portsReleased(old);
    const started = await startLife(settings, next, ports, disk, allowLoopback, logger);
    await draining;
    if (started === undefined) {
      await caddy?.stop();
      return 1;
    }
    life = started;
    logger.info({ lastSeq: next.log.lastSeq, pending: next.stats().pending }, 'serving again after the poisoned log');
  }
}

/** Opens the engine, loader, dispatcher, HTTP and Flight on `ports`; undefined (all closed, the reason logged) when a port cannot be bound. */
async function startLife(settings: ServeSettings, engine: Engine, ports: Ports, disk: DiskSpaceCheck, allowLoopback: boolean, logger: Logger): Promise<Life | undefined> {
  const wal = engine.log;
  logger.info({ ...wal.describe(), lastSeq: wal.lastSeq, resident: engine.stats().resident, pending: engine.stats().pending }, 'engine open');
  // Read again at each step: a container whose limit is lowered at run time spills at once.
  const loader = new MemoryLoader(engine, {
    budget: () => memoryBudget(settings.memoryBudgetBytes),
    clock: systemClock,
    limits: { farHorizonMs: settings.farHorizonMs },
    logger: logger.child({ component: 'loader' }),
    returnMemory: memoryReturn(),
    trimMemory: mallocTrim(),
  });
  loader.start();
  const dispatcher = new Dispatcher({
    engine,
    clock: systemClock,
    logger: logger.child({ component: 'dispatch' }),
    allow: settings.dispatch.allow,
    allowLoopback,
    signingSecrets: settings.dispatch.signingSecrets,
    ...(settings.dispatch.threads === undefined ? {} : { threads: settings.dispatch.threads }),
    ...(settings.dispatch.ca === undefined ? {} : { ca: settings.dispatch.ca }),
  });
  const closeEngineSide = async (): Promise<void> => {
    await loader.stop();
    await dispatcher.close();
    await engine.close().catch(() => undefined);
  };
  const app = await startHttp(settings, ports, engine, dispatcher, disk, logger);
  if (app === undefined) {
    await closeEngineSide();
    return undefined;
  }
  const flight = await startFlight(settings, ports.flight, engine, dispatcher.pull, logger);
  if (flight === 'failed') {
    await drainHttp(app, logger);
    await closeEngineSide();
    return undefined;
  }
  dispatcher.start();
  logger.info({ threads: dispatcher.threads, signing: settings.dispatch.signingSecrets.length > 0, allowLoopback }, 'dispatching');
  return { engine, loader, dispatcher, app, flight };
}

/** The ports a life was given, for the next one to listen on. */
function portsOf(life: Life, asked: Ports): Ports {
  const cleartext = life.app.server.address();
  const secure = life.app.server.tls?.address();
  assert.ok(cleartext !== null && typeof cleartext === 'object', 'the cleartext port is listening');
  return {
    listen: { host: asked.listen.host, port: cleartext.port },
    tls: asked.tls === undefined || secure === undefined || secure === null || typeof secure !== 'object' ? asked.tls : { host: asked.tls.host, port: secure.port },
    flight: asked.flight === undefined || life.flight === undefined ? asked.flight : { host: asked.flight.host, port: life.flight.port },
  };
}

/** Stops everything of a life: its ports (drained), its deliveries (recorded, bounded), its loader, its engine; the exit code so far. */
async function stopLife(life: Life, logger: Logger): Promise<number> {
  // Both drains at once: each is bounded by its own timeout.
  let [exitCode] = await Promise.all([drainHttp(life.app, logger), life.flight?.close()]);
  // Deliveries in flight finish and are recorded (bounded); what is not recorded is delivered again after a restart.
  await life.dispatcher.close();
  await life.loader.stop();
  try {
    await life.engine.close();
  } catch (err) {
    logger.error({ err }, 'closing the engine failed');
    exitCode = 1;
  }
  return exitCode;
}

/** A poisoned life's deliveries, loader and engine stop (releasing the data directory); its ports still answer. */
async function stopDelivering(life: Life): Promise<void> {
  await life.dispatcher.close();
  await life.loader.stop();
}

/** A life's ports, drained; the exit code of the HTTP drain. */
async function stopServing(life: Life, logger: Logger): Promise<number> {
  const [exitCode] = await Promise.all([drainHttp(life.app, logger), life.flight?.close()]);
  return exitCode;
}

/** Resolves once a draining life no longer listens on its ports (its open connections may still be finishing). */
async function portsReleased(life: Life): Promise<void> {
  const deadline = performance.now() + serviceLimits.portReleaseWaitMsMax;
  while (life.app.server.listening || life.app.server.tls?.listening === true) {
    if (performance.now() > deadline) return;
    await sleep(5);
  }
}

/**
 * Opens the data directory again after a poisoned log, backing off while the disk fails;
 * undefined when a stop is asked meanwhile. First the poisoned log is cut back to its last
 * synced record (and the engine closed, releasing the directory): the new life must not read
 * back records whose clients were refused, nor append after bytes the kernel may have dropped.
 */
async function reopen(
  poisoned: Engine,
  hasRoom: () => Promise<string | undefined>,
  openEngine: () => Promise<Engine>,
  stopRequested: Promise<NodeJS.Signals>,
  logger: Logger,
): Promise<Engine | undefined> {
  let stopping = false;
  const stop = stopRequested.then(() => {
    stopping = true;
    return undefined;
  });
  let released = false;
  for (let delayMs: number = serviceLimits.reopenDelayMsMin; ; delayMs = Math.min(2 * delayMs, serviceLimits.reopenDelayMsMax)) {
    try {
      if (!released) {
        await poisoned.log.cutToSynced();
        await poisoned.close();
        released = true;
      }
      const waiting = await hasRoom();
      if (waiting !== undefined) throw new Error(waiting);
      const engine = await openEngine();
      // A stop asked while the log was replayed: no new life is started for it.
      if (!stopping) return engine;
      await engine.close().catch(() => undefined);
      return undefined;
    } catch (err) {
      logger.error({ err, retryInMs: delayMs }, released ? 'opening the data directory again failed' : 'cutting the poisoned log back to its last synced record failed');
    }
    const waited = await Promise.race([stop, sleep(delayMs).then(() => 'again' as const)]);
    if (waited === undefined) return undefined;
  }
}

/**
 * The HTTP adapter on the engine, listening on the cleartext port and, when configured, the TLS
 * port; logs one "listening" line for each, cleartext first. Undefined (after logging why and
 * closing what was opened) when a port cannot be bound.
 */
async function startHttp(settings: ServeSettings, ports: Ports, engine: Engine, dispatcher: Dispatcher, disk: DiskSpaceCheck, logger: Logger): Promise<HttpServer | undefined> {
  const app = createHttpServer({
    logger: logger.child({ component: 'http' }),
    engine,
    tokens: settings.tokens,
    disk,
    metrics: (registry) => registerDispatchMetrics(registry, dispatcher),
    ...(settings.tls === undefined ? {} : { tls: settings.tls.credentials }),
  });
  if (settings.http3 !== undefined && settings.tls !== undefined) advertiseHttp3(app, settings.http3.port);
  let bound = `${ports.listen.host}:${ports.listen.port}`;
  try {
    await app.listen({ host: ports.listen.host, port: ports.listen.port });
    const secure = app.server.tls;
    if (ports.tls !== undefined && secure !== undefined) {
      bound = `${ports.tls.host}:${ports.tls.port} (TLS)`;
      secure.listen({ host: ports.tls.host, port: ports.tls.port });
      await once(secure, 'listening');
    }
  } catch (err) {
    logStartFailure(logger, err, `cannot listen on ${bound}`);
    await app.close().catch(() => undefined);
    return undefined;
  }
  logger.info({ url: urlOf('http', app.server.address()), data: settings.dataDir }, 'listening');
  if (app.server.tls !== undefined) logger.info({ url: urlOf('https', app.server.tls.address()), alpn: alpnProtocols }, 'listening');
  return app;
}

/** The Arrow Flight service when --flight is set: logs a "flight listening" line with its grpc+tcp:// "url"; 'failed' (logged) when it cannot bind. */
async function startFlight(settings: ServeSettings, address: ListenAddress | undefined, engine: Engine, pull: PullQueues, logger: Logger): Promise<FlightListener | undefined | 'failed'> {
  if (address === undefined) return undefined;
  const service = new FlightService({ engine, logger: logger.child({ component: 'flight' }), tokens: settings.tokens, pull });
  try {
    const listener = await service.listen(address.host, address.port);
    logger.info({ url: listener.url }, 'flight listening');
    return listener;
  } catch (err) {
    logStartFailure(logger, err, `cannot listen on ${address.host}:${address.port} (Flight)`);
    return 'failed';
  }
}

/** The HTTP/3 adapter when --http3 is set: a supervised Caddy forwarding to the cleartext port; 'failed' (logged) when it does not come up. */
async function startHttp3(settings: ServeSettings, app: HttpServer, logger: Logger): Promise<CaddySupervisor | undefined | 'failed'> {
  if (settings.http3 === undefined || settings.tls === undefined) return undefined;
  const cleartext = app.server.address();
  assert.ok(cleartext !== null && typeof cleartext === 'object', 'the cleartext port is listening');
  const upstreamHost = cleartext.family === 'IPv6' ? (cleartext.address === '::' ? '[::1]' : `[${cleartext.address}]`) : cleartext.address === '0.0.0.0' ? '127.0.0.1' : cleartext.address;
  const caddy = new CaddySupervisor({
    dir: resolve(settings.dataDir, 'http3'),
    config: { host: settings.tls.listen.host, port: settings.http3.port, upstream: `${upstreamHost}:${cleartext.port}`, certFile: settings.http3.certFile, keyFile: settings.http3.keyFile },
    logger: logger.child({ component: 'http3' }),
  });
  try {
    await caddy.start();
  } catch (err) {
    logStartFailure(logger, err, `cannot serve HTTP/3 on ${settings.tls.listen.host}:${settings.http3.port}`);
    return 'failed';
  }
  logger.info({ url: `https://${settings.tls.listen.host.includes(':') ? `[${settings.tls.listen.host}]` : settings.tls.listen.host}:${settings.http3.port}`, protocol: 'h3' }, 'http3 listening');
  return caddy;
}

/** Stops accepting on every port and lets open requests finish, cutting them after drainTimeoutMs; the exit code so far. */
async function drainHttp(app: HttpServer, logger: Logger): Promise<number> {
  const cut = setTimeout(() => {
    logger.warn({ drainTimeoutMs }, 'connections still open after the drain timeout: closing them');
    app.server.closeAllConnections();
  }, drainTimeoutMs);
  try {
    await app.close();
    return 0;
  } catch (err) {
    logger.error({ err }, 'closing the HTTP server failed');
    return 1;
  } finally {
    clearTimeout(cut);
  }
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

function urlOf(scheme: 'http' | 'https', address: AddressInfo | string | null): string {
  assert.ok(address !== null && typeof address === 'object', 'a TCP listener has an address once listening');
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `${scheme}://${host}:${address.port}`;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
