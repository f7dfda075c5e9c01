// Where the cluster's database is, and the client pool a process opens on it.
//
// The URL comes from --cluster or FERMATA_CLUSTER_URL; it may name several hosts
// (postgres://user@h1:5432,h2:5432/db?target_session_attrs=read-write) for a database that fails
// over. The password is never taken from the command line, where any user sees it in the process
// list: a --cluster URL that carries one is refused. It comes from PGPASSWORD, from the
// environment's URL, or from the .pgpass file (PGPASSFILE or ~/.pgpass, read by the pgpass
// package as libpq reads it, matched against the first host). TLS is the URL's `sslmode`, which
// the postgres client honours. One pool per process: its owner ends it.
import net from 'node:net';
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
  if (flag !== undefined && urlHasPassword(flag)) {
    return {
      kind: 'refused',
      message: 'the --cluster URL carries a password, which every user of this machine could read in the process list: ' +
        `give the URL without it and the password in PGPASSWORD, in ${clusterUrlEnv}, or in ~/.pgpass (PGPASSFILE)`,
    };
  }
  return { kind: 'url', url };
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
function noDelaySockets(): (options: Sql['options']) => net.Socket {
  let next = 0;
  return (options) => {
    if (options.path) return net.connect({ path: options.path });
    const index = next++ % Math.max(1, options.host.length);
    const host = options.host[index] ?? 'localhost';
    const port = options.port[index] ?? options.port[0] ?? 5432;
    // The client reads host and port off its socket (the TLS server name, error messages).
    return Object.assign(net.connect({ host, port, noDelay: true }), { host, port });
  };
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
  // `socket` is an option the client reads but its types do not list.
  const socketOption: object = { socket: noDelaySockets() };
  const sql: Sql = postgres(url, {
    max: options.max ?? 10,
    connect_timeout: options.connectTimeoutSeconds ?? 10,
    onnotice: () => {},
    connection: { application_name: 'fermata' },
    ...sessionAttrsFor(url),
    ...(explicit ? {} : { pass: () => passwordFromPgpass(sql.options) }),
    ...socketOption,
  });
  return sql;
}
