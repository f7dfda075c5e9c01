// `fermata serve --config FILE`: a JSON object of settings, read once on the main thread. Every
// key is checked here for its name and type (an unknown or mistyped key is a usage error naming
// the file and the key); cli/serve/settings.ts decides what wins over it. "dispatch" is checked
// whole with its environment overrides (cli/dispatch-config.ts).
import { readFileSync } from 'node:fs';
import { fullGrant, scopes, type Scope, type TokenGrant } from '../../ingest/auth/access.ts';
import { tokenLengthMin } from '../../ingest/http/listen/bearer-auth.ts';
import { type ClusterConfig, readClusterConfig } from './cluster-settings.ts';
import { messageOf, UsageError } from './errors.ts';

const configKeys = ['data', 'listen', 'tokens', 'tls', 'readiness', 'dispatch', 'memory_budget', 'far_horizon', 'flight', 'grpc', 'http3', 'clock', 'cluster'] as const;
const flightConfigKeys = ['listen'] as const;
const grpcConfigKeys = ['listen', 'tls'] as const;
const http3ConfigKeys = ['port'] as const;
const tlsConfigKeys = ['cert', 'key', 'listen'] as const;
const readinessConfigKeys = ['disk_free_bytes_min'] as const;

export interface ServeConfig {
  data?: string;
  listen?: string;
  tokens?: TokenGrant[];
  tls?: { cert?: string; key?: string; listen?: string };
  readiness?: { disk_free_bytes_min?: number };
  dispatch?: unknown;
  memory_budget?: string | number;
  far_horizon?: string;
  /** "real" or "manual", as given: cli/serve/settings.ts checks it with --clock's rules. */
  clock?: string;
  flight?: { listen?: string };
  /** The gRPC port ("flight" is its older name); tls: serve it with the TLS port's certificate. */
  grpc?: { listen?: string; tls?: boolean };
  /** The port as given: cli/serve/settings.ts checks it with --http3's rules. */
  http3?: { port?: number };
  /** Cluster mode (cli/serve/cluster-settings.ts). */
  cluster?: ClusterConfig;
}

export function readConfig(file: string): ServeConfig {
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
        if (!Array.isArray(entry)) throw new UsageError(`config file ${file}: "tokens" must be an array of tokens (strings, or objects {"name", "token", "scopes", "queues"})`);
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
      case 'grpc':
        config.grpc = {};
        for (const [grpcKey, grpcEntry] of objectEntries(entry, file, 'grpc.', grpcConfigKeys)) {
          if (grpcKey === 'listen') config.grpc.listen = configString(grpcEntry, file, 'grpc.listen');
          else if (typeof grpcEntry === 'boolean') config.grpc.tls = grpcEntry;
          else throw new UsageError(`config file ${file}: "grpc.tls" must be true or false, not ${JSON.stringify(grpcEntry)}`);
        }
        break;
      case 'http3':
        config.http3 = {};
        for (const [http3Key, port] of objectEntries(entry, file, 'http3.', http3ConfigKeys)) {
          if (typeof port !== 'number') throw new UsageError(`config file ${file}: "http3.${http3Key}" must be a port number, not ${JSON.stringify(port)}`);
          config.http3[http3Key] = port;
        }
        break;
      case 'dispatch':
        // Checked whole with the environment's overrides (cli/dispatch-config.ts).
        config.dispatch = entry;
        break;
      case 'memory_budget':
        // A size as the flag takes it ("512MiB"), or a plain number of bytes; cli/serve/settings.ts checks the value.
        if (typeof entry !== 'string' && typeof entry !== 'number') {
          throw new UsageError(`config file ${file}: "memory_budget" must be a size such as "512MiB" or a number of bytes, not ${JSON.stringify(entry)}`);
        }
        config.memory_budget = entry;
        break;
      case 'far_horizon':
        config.far_horizon = configString(entry, file, key);
        break;
      case 'clock':
        config.clock = configString(entry, file, key);
        break;
      case 'cluster':
        config.cluster = readClusterConfig(entry, file);
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

const tokenKeys = ['name', 'token', 'scopes', 'queues'] as const;

/**
 * Bearer tokens from the config file or FERMATA_TOKENS: each a string (every scope, every
 * queue, named token-N by its place) or an object {"name"?, "token", "scopes", "queues"?};
 * trimmed, each long enough and without spaces, names unique. A refusal says which token (by
 * its place or name: the token itself is a secret) and why.
 */
export function checkTokens(tokens: readonly unknown[], source: string): TokenGrant[] {
  const checked: TokenGrant[] = [];
  for (const [index, entry] of tokens.entries()) {
    const which = tokens.length === 1 ? 'the token' : `token ${index + 1} of ${tokens.length}`;
    const grant = typeof entry === 'string' ? fullGrant(entry, index) : tokenObject(entry, index, source, which);
    const trimmed = grant.token.trim();
    if (trimmed.length < tokenLengthMin) {
      throw new UsageError(`${source}: ${which} is ${trimmed.length} characters long: a token must be at least ${tokenLengthMin} characters`);
    }
    if (/\s/.test(trimmed)) throw new UsageError(`${source}: ${which} holds a space; a token is at least ${tokenLengthMin} characters without spaces`);
    if (checked.some((earlier) => earlier.name === grant.name)) throw new UsageError(`${source}: ${which} is named "${grant.name}", as an earlier one is: names must be unique (audit lines use them)`);
    checked.push({ ...grant, token: trimmed });
  }
  return checked;
}

function tokenObject(entry: unknown, index: number, source: string, which: string): TokenGrant {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw new UsageError(`${source}: ${which} is neither a string nor an object {"name", "token", "scopes", "queues"}`);
  const fields = entry as Record<string, unknown>;
  for (const key of Object.keys(fields)) {
    if (!(tokenKeys as readonly string[]).includes(key)) throw new UsageError(`${source}: ${which} has an unknown key "${key}" (known keys: ${tokenKeys.join(', ')})`);
  }
  const { name, token, scopes: given, queues } = fields;
  if (typeof token !== 'string') throw new UsageError(`${source}: ${which} needs "token", a string`);
  if (name !== undefined && (typeof name !== 'string' || name === '')) throw new UsageError(`${source}: ${which}'s "name" must be a non-empty string`);
  if (!Array.isArray(given) || given.length === 0 || given.some((scope) => !(scopes as readonly unknown[]).includes(scope))) {
    throw new UsageError(`${source}: ${which}'s "scopes" must be a non-empty array of ${scopes.map((scope) => `"${scope}"`).join(', ')}`);
  }
  if (queues !== undefined && (!Array.isArray(queues) || queues.length === 0 || queues.some((queue) => typeof queue !== 'string' || queue === ''))) {
    throw new UsageError(`${source}: ${which}'s "queues" must be a non-empty array of queue names`);
  }
  return { name: (name as string | undefined) ?? `token-${index + 1}`, token, scopes: given as Scope[], queues: queues as string[] | undefined };
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
