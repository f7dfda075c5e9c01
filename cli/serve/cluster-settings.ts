// `fermata serve --cluster URL`: the settings of a cluster node, settled with the rest of serve's
// settings (cli/serve/settings.ts) on the main thread before anything opens. The URL comes from
// --cluster, else FERMATA_CLUSTER_URL, else the config file's "cluster": {"url"}; a --cluster URL
// carrying a password is refused (cluster/connection.ts says why and where the password goes).
// The config file's "cluster" also takes "node_id", "advertise" (host:port other nodes forward
// to; default: the address this node listens on) and the lease timings "lease_ttl_ms" and
// "renew_ms". A manual clock is refused: the nodes' timers must fire on one time, the real one.
// The cluster secret (FERMATA_CLUSTER_SECRET, else the config file's "cluster": {"secret"}) is
// what nodes present to each other on a forwarded request; cluster mode refuses to start without
// it rather than make one up, since every node must be given the same one.
import { chooseClusterUrl, clusterUrlEnv } from '../../cluster/connection.ts';
import { checkLeaseSettings, defaultLeaseSettings, type LeaseSettings } from '../../cluster/leases.ts';
import { isNodeId } from '../../cluster/membership.ts';
import { messageOf, UsageError } from './errors.ts';

export interface ClusterSettings {
  readonly url: string;
  /** Configured, or undefined: the one kept in the data directory (made at the first start). */
  readonly nodeId: string | undefined;
  /** Configured, or undefined: the cleartext address this node listens on, once bound. */
  readonly advertise: string | undefined;
  readonly lease: LeaseSettings;
  /** The secret forwarded requests carry (ingest/http/cluster/forwarder.ts), the same on every node. */
  readonly secret: string;
}

export const clusterSecretEnv = 'FERMATA_CLUSTER_SECRET';

const clusterConfigKeys = ['url', 'node_id', 'advertise', 'lease_ttl_ms', 'renew_ms', 'secret'] as const;

/** The config file's "cluster" object, keys and types checked. */
export interface ClusterConfig {
  readonly url?: string;
  readonly node_id?: string;
  readonly advertise?: string;
  readonly lease_ttl_ms?: number;
  readonly renew_ms?: number;
  readonly secret?: string;
}

export function readClusterConfig(entry: unknown, file: string): ClusterConfig {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
    throw new UsageError(`config file ${file}: "cluster" must be a JSON object (with the keys ${clusterConfigKeys.join(', ')})`);
  }
  const config: Record<string, string | number> = {};
  for (const [key, value] of Object.entries(entry)) {
    if (!(clusterConfigKeys as readonly string[]).includes(key)) {
      throw new UsageError(`config file ${file}: unknown key "cluster.${key}" (known keys: ${clusterConfigKeys.map((name) => `cluster.${name}`).join(', ')})`);
    }
    const whole = key.endsWith('_ms');
    if (whole ? !(typeof value === 'number' && Number.isSafeInteger(value) && value > 0) : typeof value !== 'string') {
      throw new UsageError(`config file ${file}: "cluster.${key}" must be ${whole ? 'a whole number of ms above 0' : 'a string'}, not ${JSON.stringify(value)}`);
    }
    config[key] = value as string | number;
  }
  return config as ClusterConfig;
}

/**
 * The cluster settings, or undefined when neither --cluster, FERMATA_CLUSTER_URL nor the config
 * file's "cluster" asks for cluster mode.
 */
export function clusterSettings(flag: string | undefined, env: NodeJS.ProcessEnv, config: ClusterConfig | undefined, configFile: string | undefined, clock: 'real' | 'manual'): ClusterSettings | undefined {
  const fromEnv = env[clusterUrlEnv];
  if (flag === undefined && (fromEnv === undefined || fromEnv === '') && config === undefined) return undefined;
  const source = flag !== undefined ? '--cluster' : fromEnv !== undefined && fromEnv !== '' ? clusterUrlEnv : `config file ${configFile}, "cluster.url"`;
  const choice = chooseClusterUrl(flag, fromEnv !== undefined && fromEnv !== '' ? env : { ...env, [clusterUrlEnv]: config?.url });
  if (choice.kind === 'refused') throw new UsageError(`${source}: ${choice.message}`);
  if (clock === 'manual') throw new UsageError(`${source}: cluster mode runs on the real clock (every node fires timers by the same time); --clock manual is for a single node`);
  if (config?.node_id !== undefined && !isNodeId(config.node_id)) {
    throw new UsageError(`config file ${configFile}: "cluster.node_id" ${JSON.stringify(config.node_id)} is not a node id (1–128 of A-Z a-z 0-9 . _ -)`);
  }
  const secret = env[clusterSecretEnv] || config?.secret;
  if (secret === undefined || secret === '') {
    throw new UsageError(
      `${source}: cluster mode needs the cluster secret, the same on every node (nodes present it to each other when they forward a request): set ${clusterSecretEnv} or the config file's "cluster": {"secret"}`,
    );
  }
  return { url: choice.url, nodeId: config?.node_id, advertise: config?.advertise, lease: leaseSettings(config, configFile), secret };
}

/**
 * The lease timings: a TTL and a renewal interval given, the safety margin is a fifth of the TTL
 * and the grace two renewals (the defaults keep those proportions); their relations are checked.
 */
function leaseSettings(config: ClusterConfig | undefined, configFile: string | undefined): LeaseSettings {
  if (config?.lease_ttl_ms === undefined && config?.renew_ms === undefined) return defaultLeaseSettings;
  const leaseTtlMs = config.lease_ttl_ms ?? defaultLeaseSettings.leaseTtlMs;
  const renewIntervalMs = config.renew_ms ?? defaultLeaseSettings.renewIntervalMs;
  const settings = { leaseTtlMs, renewIntervalMs, safetyMarginMs: Math.max(1, Math.round(leaseTtlMs / 5)), graceMs: 2 * renewIntervalMs };
  try {
    checkLeaseSettings(settings);
  } catch (err) {
    throw new UsageError(`config file ${configFile}: "cluster.lease_ttl_ms" ${leaseTtlMs} and "cluster.renew_ms" ${renewIntervalMs} do not fit: ${messageOf(err)}`);
  }
  return settings;
}
