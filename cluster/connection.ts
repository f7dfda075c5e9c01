// Where the cluster's database is, and the client pool a process opens on it.
//
// The URL comes from --cluster or FERMATA_CLUSTER_URL; it may name several hosts
// (postgres://user@h1:5432,h2:5432/db?target_session_attrs=read-write) for a database that fails
// over. The password is never taken from the command line, where any user sees it in the process
// list: a --cluster URL that carries one is refused. It comes from PGPASSWORD, from the
// environment's URL, or from the .pgpass file (PGPASSFILE or ~/.pgpass, read by the pgpass
// package as libpq reads it, matched against the first host). TLS is the URL's `sslmode`, which
// the postgres client honours. One pool per process: its owner ends it.
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

/** A pool on the cluster database. The password: the URL's, else PGPASSWORD, else .pgpass. */
export function openClusterPool(url: string, options: ClusterPoolOptions = {}): Sql {
  const explicit = urlHasPassword(url) || process.env.PGPASSWORD !== undefined;
  const sql: Sql = postgres(url, {
    max: options.max ?? 10,
    connect_timeout: options.connectTimeoutSeconds ?? 10,
    onnotice: () => {},
    connection: { application_name: 'fermata' },
    ...(explicit ? {} : { pass: () => passwordFromPgpass(sql.options) }),
  });
  return sql;
}
