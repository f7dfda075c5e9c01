// Where the cluster's database is, and the client pool a process opens on it.
//
// The URL comes from --cluster or FERMATA_CLUSTER_URL; it may name several hosts
// (postgres://user@h1:5432,h2:5432/db?target_session_attrs=read-write) for a database that fails
// over. The password is never taken from the command line, where any user sees it in the process
// list: a --cluster URL that carries one is refused. It comes from PGPASSWORD, from the
// environment's URL, or from the .pgpass file (PGPASSFILE or ~/.pgpass, read by the pgpass
// package as libpq reads it, matched against the first host). TLS is what the URL's `sslmode`,
// `sslrootcert`, `sslcert` and `sslkey` (or PGSSLMODE, PGSSLROOTCERT, PGSSLCERT, PGSSLKEY) ask
// for, read as libpq reads them (clusterTlsOf): the postgres client knows sslmode alone, would
// send the others to the server as settings, and would check a server's certificate against
// Node's public CAs only. One pool per process: its owner ends it.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { checkServerIdentity, type ConnectionOptions, type PeerCertificate } from 'node:tls';
import postgres, { type Sql } from 'postgres';
import pgpass from 'pgpass';

/** The environment variable a cluster URL may come from. */
export const clusterUrlEnv = 'FERMATA_CLUSTER_URL';

export type ClusterUrlChoice =
  | { readonly kind: 'url'; readonly url: string }
  | { readonly kind: 'refused'; readonly message: string };

/** True when a postgres:// URL carries a password, in its user part or as a query parameter. */
export function urlHasPassword(url: string): boolean {
  const match = /^postgres(?:ql)?:\/\/([^/?#]*)/i.exec(url);
  const authority = match?.[1] ?? '';
  const at = authority.lastIndexOf('@');
  if (at >= 0 && authority.slice(0, at).includes(':')) return true;
  const query = url.indexOf('?');
  return query >= 0 && new URLSearchParams(url.slice(query + 1)).has('password');
}

/** The cluster URL from the --cluster flag or the environment, or why it cannot be used. */
export function chooseClusterUrl(flag: string | undefined, env: NodeJS.ProcessEnv): ClusterUrlChoice {
  const url = flag ?? env[clusterUrlEnv];
  if (url === undefined || url === '') return { kind: 'refused', message: `no cluster database: give --cluster postgres://user@host/db or set ${clusterUrlEnv}` };
  if (!/^postgres(?:ql)?:\/\//i.test(url)) return { kind: 'refused', message: `the cluster URL must start with postgres:// (got "${url.slice(0, 20)}…")` };
  try {
    clusterTlsOf(url, env);
  } catch (err) {
    if (err instanceof ClusterTlsError) return { kind: 'refused', message: err.message };
    throw err;
  }
  if (flag !== undefined && urlHasPassword(flag)) {
    return {
      kind: 'refused',
      message: 'the --cluster URL carries a password, which every user of this machine could read in the process list: ' +
        `give the URL without it and the password in PGPASSWORD, in ${clusterUrlEnv}, or in ~/.pgpass (PGPASSFILE)`,
    };
  }
  return { kind: 'url', url };
}

/** A cluster URL's TLS parameters that cannot be used: a mode libpq does not know, a file that cannot be read. */
export class ClusterTlsError extends Error {
  override readonly name = 'ClusterTlsError';
}

/** The TLS a cluster URL asks for, and the URL without the parameters that asked (the client would send them to the server as settings). */
export interface ClusterTls {
  /** As libpq's sslmode; `allow` is taken as `prefer`, and `require` with a CA file as `verify-ca`, as libpq does. */
  readonly mode: 'disable' | 'prefer' | 'require' | 'verify-ca' | 'verify-full';
  /** What the client's TLS connection is given (require and the verify modes). */
  readonly options: ConnectionOptions;
  readonly url: string;
}

const sslModes = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
/** The URL parameters read here, each with libpq's environment variable. */
const tlsParameters = { sslmode: 'PGSSLMODE', sslrootcert: 'PGSSLROOTCERT', sslcert: 'PGSSLCERT', sslkey: 'PGSSLKEY' } as const;

function readTlsFile(file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new ClusterTlsError(`the cluster URL's ${what} "${file}" cannot be read: ${(err as Error).message}`);
  }
}

/**
 * The URL's TLS, as libpq reads it: no sslmode is `disable` (the client's default, where libpq's
 * is `prefer`); `require` encrypts without checking the server (unless a CA file is given: then
 * `verify-ca`); `verify-ca` checks the server's certificate against the CA file (sslrootcert, else
 * ~/.postgresql/root.crt; `system` is the machine's public CAs); `verify-full` checks its name
 * too, against the host the URL names. sslcert and sslkey give a client certificate. A
 * ClusterTlsError names what cannot be used.
 */
export function clusterTlsOf(url: string, env: NodeJS.ProcessEnv = process.env): ClusterTls {
  const at = url.indexOf('?');
  const query = new URLSearchParams(at < 0 ? '' : url.slice(at + 1));
  const given = (name: keyof typeof tlsParameters): string | undefined => query.get(name) ?? (env[tlsParameters[name]] || undefined);
  const asked = given('sslmode') ?? 'disable';
  if (!(sslModes as readonly string[]).includes(asked)) throw new ClusterTlsError(`the cluster URL's sslmode "${asked}" is not one of ${sslModes.join(', ')}`);
  const rootCert = given('sslrootcert');
  const cert = given('sslcert');
  const key = given('sslkey');
  for (const name of Object.keys(tlsParameters)) query.delete(name);
  const rest = query.toString();
  const bare = (at < 0 ? url : url.slice(0, at)) + (rest === '' ? '' : `?${rest}`);
  const mode = asked === 'allow' ? 'prefer' : asked === 'require' && rootCert !== undefined ? 'verify-ca' : (asked as ClusterTls['mode']);
  if (mode === 'disable' || mode === 'prefer') return { mode, options: {}, url: bare };
  const options: ConnectionOptions = {};
  if ((cert === undefined) !== (key === undefined)) throw new ClusterTlsError('a client certificate needs both sslcert and sslkey in the cluster URL');
  if (cert !== undefined && key !== undefined) Object.assign(options, { cert: readTlsFile(cert, 'sslcert'), key: readTlsFile(key, 'sslkey') });
  if (mode === 'require') return { mode, options: { ...options, rejectUnauthorized: false }, url: bare };
  // `system`: Node's own CAs, which the client checks against when given none.
  if (rootCert === undefined) options.ca = readTlsFile(join(env.HOME || homedir(), '.postgresql', 'root.crt'), `sslmode=${mode} needs the CA that signed the server's certificate: no sslrootcert is given, and the default`);
  else if (rootCert !== 'system') options.ca = readTlsFile(rootCert, 'sslrootcert');
  // verify-ca trusts any name the CA signed; verify-full checks the name against the URL's host.
  options.checkServerIdentity = mode === 'verify-ca' ? () => undefined : checkUrlHost;
  return { mode, options: { ...options, rejectUnauthorized: true }, url: bare };
}

/**
 * verify-full's check of the server's certificate against the host the URL names. The client
 * names the server to Node only when it is not an IP address, and Node then checks an IP host as
 * "localhost": a certificate for localhost would pass for any address. Node calls the check on the
 * connection's options, which hold the socket this module opened, and the socket holds its host
 * (noDelaySockets); without it the check refuses rather than guess.
 */
function checkUrlHost(this: { readonly socket?: { readonly host?: unknown } } | undefined, _name: string, cert: PeerCertificate): Error | undefined {
  const host = this?.socket?.host;
  if (typeof host !== 'string') return new Error('sslmode=verify-full: the host the certificate must name is not known');
  return checkServerIdentity(host, cert);
}

export interface ClusterPoolOptions {
  /** Connections at most (the pool opens them as needed). */
  readonly max?: number;
  /** Seconds to wait for a connection before the query fails. */
  readonly connectTimeoutSeconds?: number;
}

function passwordFromPgpass(options: Sql['options']): Promise<string> {
  return new Promise((resolve) => {
    pgpass(
      { host: options.host[0] ?? 'localhost', port: options.port[0] ?? 5432, database: options.database ?? '', user: options.user ?? '' },
      (password) => resolve(password ?? ''),
    );
  });
}

/**
 * The client's sockets, opened with TCP_NODELAY. The client opens its own without it, and a
 * COPY's data and end, written one after the other, then wait for the server's delayed ACK: 40
 * ms and more a transaction on Linux (a PgLog append measured 86 ms against 7 ms with this).
 * The client calls this factory at each connection with its parsed options and takes the socket
 * as connected; a socket still connecting holds what is written until it is, and its failure
 * reaches the client as its own would (error, close, connect again). The factory takes the
 * URL's hosts in turn, as the client does, so a host that refuses, or that is read-only under
 * target_session_attrs=read-write, is followed by the next. The client's connect_timeout
 * covers the whole start-up, the TCP connect included.
 */
function noDelaySockets(tls: ClusterTls): (options: Sql['options']) => net.Socket {
  let next = 0;
  return (options) => {
    if (options.path) return net.connect({ path: options.path });
    const index = next++ % Math.max(1, options.host.length);
    const host = options.host[index] ?? 'localhost';
    const port = options.port[index] ?? options.port[0] ?? 5432;
    const socket = tls.mode === 'disable' || tls.mode === 'prefer' ? new net.Socket() : new TlsRequiredSocket(`${host}:${port}`, tls.mode);
    // The client reads host and port off its socket (the TLS server name, error messages).
    return Object.assign(socket.setNoDelay(true).connect({ host, port }), { host, port });
  };
}

/**
 * A connection on which the URL asks for TLS. The first byte a server sends is its answer to the
 * client's SSLRequest: `S`, or `N` from a server without TLS. On `N` the client would start TLS
 * anyway and fail with a reset that names nothing, or, with several hosts, wait for no one; so
 * that answer is not passed on, and the socket ends with an error that says what is wrong, which
 * the client gives the query that asked for the connection, as any failure to connect (or it
 * tries the URL's next host).
 */
class TlsRequiredSocket extends net.Socket {
  readonly #address: string;
  readonly #mode: ClusterTls['mode'];
  #answered = false;

  constructor(address: string, mode: ClusterTls['mode']) {
    super();
    this.#address = address;
    this.#mode = mode;
  }

  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (event !== 'data' || this.#answered) return super.emit(event, ...args);
    this.#answered = true;
    if ((args[0] as Buffer)[0] === 0x53) return super.emit(event, ...args);
    const refused = new ClusterTlsError(`the PostgreSQL server at ${this.#address} does not accept TLS connections, and the cluster URL asks for TLS (sslmode=${this.#mode}): turn ssl on in the server, or name one that has it`);
    this.destroy(Object.assign(refused, { code: 'TLS_REFUSED' }));
    return true;
  }
}

/**
 * The target_session_attrs to hand the client for the URL's (or PGTARGETSESSIONATTRS's). The
 * client (postgres 3.4.9) judges `read-write` by default_transaction_read_only alone, which a
 * hot standby of PostgreSQL 14 and later reports `off`: it would take a standby still in recovery
 * during a failover, and every write there fails read-only. `primary` refuses a server in
 * recovery (in_hot_standby), which is what read-write asks of a failover pair.
 */
function sessionAttrsFor(url: string): { target_session_attrs?: 'primary' } {
  const query = url.indexOf('?');
  const asked = (query >= 0 ? new URLSearchParams(url.slice(query + 1)).get('target_session_attrs') : null) ?? process.env.PGTARGETSESSIONATTRS;
  return asked === 'read-write' ? { target_session_attrs: 'primary' } : {};
}

/** A pool on the cluster database. The password: the URL's, else PGPASSWORD, else .pgpass. */
export function openClusterPool(url: string, options: ClusterPoolOptions = {}): Sql {
  const explicit = urlHasPassword(url) || process.env.PGPASSWORD !== undefined;
  const tls = clusterTlsOf(url);
  // `socket` is an option the client reads but its types do not list.
  const socketOption: object = { socket: noDelaySockets(tls) };
  const sql: Sql = postgres(tls.url, {
    max: options.max ?? 10,
    connect_timeout: options.connectTimeoutSeconds ?? 10,
    onnotice: () => {},
    connection: { application_name: 'fermata' },
    ssl: tls.mode === 'disable' ? false : tls.mode === 'prefer' ? 'prefer' : tls.options,
    ...sessionAttrsFor(url),
    ...(explicit ? {} : { pass: () => passwordFromPgpass(sql.options) }),
    ...socketOption,
  });
  return sql;
}
