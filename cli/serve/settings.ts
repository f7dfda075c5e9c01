// The settings of `fermata serve`, settled once on the main thread before anything opens: for
// each, the flag wins over the environment variable, which wins over the config file
// (cli/serve/config-file.ts), which wins over the default. Every value is checked here, so a bad
// one is a usage error (exit 2) naming where it came from, and a port anyone else can reach is
// refused without bearer tokens unless --insecure.
import { dirname, resolve } from 'node:path';
import type { ClockMode } from '../../engine/clock.ts';
import { memoryLimits, readinessLimits } from '../../engine/limits.ts';
import type { TokenGrant } from '../../ingest/auth/access.ts';
import { isLoopbackHost, listenRefusal } from '../../ingest/http/listen/bearer-auth.ts';
import { checkCaddyInstalled, CaddyMissingError } from '../../ingest/http3/caddy-supervisor.ts';
import type { TlsCredentials } from '../../ingest/http/listen/tls-listener.ts';
import { DispatchConfigError, type DispatchSettings, parseDispatchSettings } from '../dispatch-config.ts';
import { parseDurationMs } from '../duration.ts';
import { type ClusterSettings, clusterSettings } from './cluster-settings.ts';
import { checkTokens, readConfig } from './config-file.ts';
import { UsageError } from './errors.ts';
import { http3SelfSigned, readTlsCredentials, type SettingFile } from './tls-files.ts';

export const defaults = { data: './data', listen: '127.0.0.1:7070' } as const;
/** The TLS port when --tls-listen is not given and the cleartext port is not 0. */
export const tlsPortDefault = 7443;
export const farHorizonDefaultText = `${memoryLimits.farHorizonMs / 60_000}m`;
export const farHorizonMinText = `${memoryLimits.promoteLeadMs / 60_000}m`;
/**
 * The smallest --memory-budget taken. Below it the budget cannot be what it says: Node alone
 * takes tens of MB, and half the budget (the resident timers' share) would not hold the store's
 * first columns, so every timer would wait on disk. A few bytes too few is a typo (512 for 512MiB).
 * Tests of the spill tier want exactly that, to spill a few hundred timers: they set the
 * environment variable FERMATA_MEMORY_BUDGET_FLOOR=off.
 */
export const memoryBudgetMinBytes = 16 * 1024 ** 2;
export const memoryBudgetMinText = '16MiB';

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

export interface TlsSettings {
  readonly credentials: TlsCredentials;
  readonly listen: ListenAddress;
}

export interface ServeSettings {
  readonly dataDir: string;
  readonly listen: ListenAddress;
  /** The bearer tokens with their scopes and queues; none = no authentication. */
  readonly tokens: readonly TokenGrant[];
  readonly tls: TlsSettings | undefined;
  readonly diskFreeBytesMin: number;
  readonly dispatch: DispatchSettings;
  /** --memory-budget in bytes, when set. */
  readonly memoryBudgetBytes: number | undefined;
  /** --far-horizon in ms (Infinity: off). */
  readonly farHorizonMs: number;
  /** Where the gRPC server (fermata.v1.Timers and Arrow Flight) listens, when it is on (--grpc, or its alias --flight). */
  readonly flight: ListenAddress | undefined;
  /** The gRPC port speaks TLS with the TLS port's certificate ("grpc": {"tls": true}); cleartext otherwise. */
  readonly grpcTls: boolean;
  /** The HTTP/3 port and the certificate files Caddy loads, when --http3 is on. */
  readonly http3: { readonly port: number; readonly certFile: string; readonly keyFile: string } | undefined;
  /** --clock: the real time, or a manual test clock (engine/clock.ts) that moves only when told. */
  readonly clock: ClockMode;
  /** Cluster mode (--cluster): the node's database, id, address and lease timings; undefined: a single node. */
  readonly cluster: ClusterSettings | undefined;
}

/** The command line's options as given (cli/serve/command.ts parses them). */
export interface ServeFlags {
  readonly data?: string | undefined;
  readonly listen?: string | undefined;
  readonly config?: string | undefined;
  readonly insecure?: boolean | undefined;
  readonly 'tls-cert'?: string | undefined;
  readonly 'tls-key'?: string | undefined;
  readonly 'tls-listen'?: string | undefined;
  readonly 'memory-budget'?: string | undefined;
  readonly 'far-horizon'?: string | undefined;
  readonly flight?: string | undefined;
  readonly grpc?: string | undefined;
  readonly http3?: string | undefined;
  readonly clock?: string | undefined;
  readonly cluster?: string | undefined;
}

/** A setting as chosen: its text, where it came from (for messages), and the directory a relative path in it is taken from. */
interface Setting {
  readonly value: string;
  readonly source: string;
  readonly base: string;
}

/** The settings from the flags, the environment and the config file the flags name; a UsageError names the first bad one. */
export function serveSettings(values: ServeFlags, env: NodeJS.ProcessEnv): ServeSettings {
  const configFile = values.config;
  const config = configFile === undefined ? {} : readConfig(configFile);
  /** The winning setting for option `--name`: flag, else environment variable, else config file entry, else none. */
  const pick = (name: 'data' | 'listen' | 'tls-cert' | 'tls-key' | 'tls-listen' | 'flight' | 'grpc', envName: string, configName: string, fromConfig: string | undefined): Setting | undefined => {
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
  // A manual clock's refusals come before the tokens' ones: a token does not make it safe.
  const clock = clockSetting(values.clock, env.FERMATA_CLOCK, config.clock, configFile);
  refuseManualClockOff(clock, listenAddress, listen.source);
  const fromEnv = env.FERMATA_TOKENS;
  const tokens =
    fromEnv !== undefined && fromEnv !== ''
      ? checkTokens(fromEnv.split(','), 'FERMATA_TOKENS')
      : (config.tokens ?? []);
  const insecure = values.insecure === true;
  const refusal = listenRefusal(listenAddress.host, tokens, insecure);
  if (refusal !== undefined) throw new UsageError(`${listen.source}: ${refusal}`);

  const http3Port = http3PortSetting(values.http3, env.FERMATA_HTTP3_PORT, config.http3?.port, configFile);
  let certSetting = pick('tls-cert', 'FERMATA_TLS_CERT', 'tls.cert', config.tls?.cert);
  let keySetting = pick('tls-key', 'FERMATA_TLS_KEY', 'tls.key', config.tls?.key);
  if (http3Port !== undefined && certSetting === undefined && keySetting === undefined) {
    const pair = http3SelfSigned(resolve(data.base, data.value));
    certSetting = { value: pair.certFile, source: 'the self-signed certificate made for --http3', base: process.cwd() };
    keySetting = { value: pair.keyFile, source: 'the self-signed key made for --http3', base: process.cwd() };
  }
  const tls = tlsSettings(certSetting, keySetting, pick('tls-listen', 'FERMATA_TLS_LISTEN', 'tls.listen', config.tls?.listen), listenAddress);
  if (tls !== undefined) {
    refuseManualClockOff(clock, tls.listen, 'the TLS port (and HTTP/3, on its host)');
    const tlsRefusal = listenRefusal(tls.listen.host, tokens, insecure);
    if (tlsRefusal !== undefined) throw new UsageError(`the TLS port: ${tlsRefusal}`);
  }
  // --grpc, or its older name --flight: flags first, then the environment, then the config file.
  const flight =
    values.grpc !== undefined || values.flight !== undefined
      ? pick(values.grpc !== undefined ? 'grpc' : 'flight', '', '', undefined)
      : (pick('grpc', 'FERMATA_GRPC_LISTEN', 'grpc.listen', config.grpc?.listen) ?? pick('flight', 'FERMATA_FLIGHT_LISTEN', 'flight.listen', config.flight?.listen));
  const flightAddress = flight === undefined ? undefined : parseListenAddress(flight.value, flight.source);
  if (flightAddress !== undefined) refuseManualClockOff(clock, flightAddress, flight?.source ?? '--flight');
  const flightRefusal = flightAddress === undefined ? undefined : listenRefusal(flightAddress.host, tokens, insecure);
  if (flight !== undefined && flightRefusal !== undefined) throw new UsageError(`${flight.source}: ${flightRefusal}`);
  const cluster = clusterSettings(values.cluster, env, config.cluster, configFile, clock.mode);
  const dispatch = dispatchSettings(config.dispatch, configFile, env);
  return {
    dataDir: resolve(data.base, data.value),
    listen: listenAddress,
    tokens,
    tls,
    diskFreeBytesMin: config.readiness?.disk_free_bytes_min ?? readinessLimits.diskFreeBytesMin,
    dispatch,
    memoryBudgetBytes: memoryBudgetSetting(values['memory-budget'], env, config.memory_budget, configFile),
    farHorizonMs: farHorizonSetting(values['far-horizon'], env.FERMATA_FAR_HORIZON, config.far_horizon, configFile),
    flight: flightAddress,
    grpcTls: grpcTlsSetting(config.grpc?.tls, tls, configFile),
    http3:
      http3Port === undefined || certSetting === undefined || keySetting === undefined
        ? undefined
        : { port: http3Port, certFile: resolve(certSetting.base, certSetting.value), keyFile: resolve(keySetting.base, keySetting.value) },
    clock: clock.mode,
    cluster,
  };
}

/**
 * A manual clock serves on loopback only: anyone who can reach it moves time for every timer.
 * Every listener is checked (cleartext, TLS, HTTP/3 on the TLS port's host, Flight); a service
 * sharing its timers with other nodes would be refused here too.
 */
function refuseManualClockOff(clock: { readonly mode: ClockMode; readonly source: string }, address: ListenAddress, source: string): void {
  if (clock.mode !== 'manual' || isLoopbackHost(address.host)) return;
  throw new UsageError(`${clock.source}: a manual clock serves on loopback only (whoever reaches it moves time for every timer), and ${source} is ${address.host}`);
}

/** --clock, else FERMATA_CLOCK, else the config file's "clock": "real" (the default) or "manual" (a test clock). */
function clockSetting(flag: string | undefined, fromEnv: string | undefined, fromConfig: string | undefined, configFile: string | undefined): { readonly mode: ClockMode; readonly source: string } {
  const [text, source] =
    flag !== undefined ? [flag, '--clock'] : fromEnv !== undefined && fromEnv !== '' ? [fromEnv, 'FERMATA_CLOCK'] : fromConfig !== undefined ? [fromConfig, `config file ${configFile}, "clock"`] : ['real', 'the default'];
  if (text !== 'real' && text !== 'manual') throw new UsageError(`${source}: "${text}" is not a clock: "real" (the default) or "manual" (a test clock moved by POST /v1/clock)`);
  return { mode: text, source };
}

/**
 * --http3 PORT, else FERMATA_HTTP3_PORT, else the config file's "http3": {"port"}; Caddy must be
 * installed (checked here, so a missing one is a usage error naming the package).
 */
function http3PortSetting(flag: string | undefined, fromEnv: string | undefined, fromConfig: number | undefined, configFile: string | undefined): number | undefined {
  const [text, source] =
    flag !== undefined
      ? [flag, '--http3']
      : fromEnv !== undefined && fromEnv !== ''
        ? [fromEnv, 'FERMATA_HTTP3_PORT']
        : fromConfig !== undefined
          ? [String(fromConfig), `config file ${configFile}, "http3.port"`]
          : [undefined, ''];
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

/**
 * --memory-budget, else FERMATA_MEMORY_BUDGET, else the config file's "memory_budget" (the
 * flag's text, or a plain number of bytes), in bytes; never below memoryBudgetMinBytes.
 */
function memoryBudgetSetting(flag: string | undefined, env: NodeJS.ProcessEnv, fromConfig: string | number | undefined, configFile: string | undefined): number | undefined {
  const fromEnv = env.FERMATA_MEMORY_BUDGET;
  const [given, source] =
    flag !== undefined
      ? [flag, '--memory-budget']
      : fromEnv !== undefined && fromEnv !== ''
        ? [fromEnv, 'FERMATA_MEMORY_BUDGET']
        : fromConfig !== undefined
          ? [fromConfig, `config file ${configFile}, "memory_budget"`]
          : [undefined, ''];
  if (given === undefined) return undefined;
  const bytes = typeof given === 'number' ? (Number.isSafeInteger(given) && given > 0 ? given : undefined) : parseByteSize(given);
  if (bytes === undefined) throw new UsageError(`${source}: ${JSON.stringify(given)} is not a size in bytes (a whole number, optionally with KiB, MiB or GiB)`);
  if (bytes < memoryBudgetMinBytes && env.FERMATA_MEMORY_BUDGET_FLOOR !== 'off') throw new UsageError(`${source}: ${JSON.stringify(given)} is below the smallest memory budget, ${memoryBudgetMinText} (${memoryBudgetMinBytes} bytes)`);
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
  return { credentials: readTlsCredentials(settingFile(cert), settingFile(key)), listen: address };
}

function settingFile(setting: Setting): SettingFile {
  return { file: resolve(setting.base, setting.value), source: setting.source };
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

/** "grpc": {"tls": true} takes the TLS port's certificate; asked for without one, the service would serve cleartext where TLS was meant. */
function grpcTlsSetting(asked: boolean | undefined, tls: TlsSettings | undefined, configFile: string | undefined): boolean {
  if (asked !== true) return false;
  if (tls === undefined) throw new UsageError(`config file ${configFile ?? ''}, "grpc.tls": TLS on the gRPC port needs the TLS port's certificate (--tls-cert and --tls-key, or "tls" in the config file)`);
  return true;
}
