// A real PostgreSQL for the tests of cluster mode: Debian's server programs (postgresql-15,
// installed by .ci/run), one throwaway cluster per call in a fresh temporary directory, on a free
// loopback port, with fsync and synchronous_commit on (what a 2xx in cluster mode stands on).
//
// PostgreSQL refuses to run as root, and the tests and CI do run as root: then every server
// program is spawned with the uid and gid of the `postgres` user the Debian package creates, in a
// directory chowned to it. Connections are trusted from loopback only (the unix socket lives in
// the temporary directory); a server started with a password wants it over TCP, and the harness
// itself connects through the socket.
//
// The caller stops each server in an `after` hook (`after(() => server.stop())`: node:test ties
// a hook to the context it is registered in, so this module cannot register it for its caller);
// should the process end first, an exit handler stops every server still running (SIGQUIT to the
// postmaster: an immediate shutdown) and removes its directory.
// initdb is the slow part: start one server per test file and give each test its own database
// with createDatabase. Without a password, initdb runs once per PostgreSQL build and server user:
// its result is kept as a template under the temporary folder (made in a scratch folder and
// renamed into place, so a half-made one is never used; `fermata-pg-template-*`) and each server
// starts from a copy of it (cp -a), as two test processes at once may.
//
// startStandby adds a streaming standby of a primary (pg_basebackup -R) and makes it the
// primary's synchronous standby, so that a commit acknowledged by the primary is on it; promote()
// turns it into a primary, as a managed service's failover does.
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import postgres from 'postgres';
import { toolPath } from './tools.ts';

/** The role every test connects as (a superuser: the tests create databases). */
export const postgresTestUser = 'fermata';

export interface PostgresServer {
  /** The server's folder: data directory, socket and log beneath it. */
  readonly dir: string;
  readonly port: number;
  /** postgres://fermata@127.0.0.1:PORT/postgres */
  readonly url: string;
  /** The URL of another database on this server. */
  urlOf(database: string): string;
  /** A new empty database, its URL. */
  createDatabase(name: string): Promise<string>;
  /** Immediate shutdown (as a crash would), then the folder is removed. Idempotent. */
  stop(): Promise<void>;
  /** Immediate shutdown, keeping the data: the database is unreachable until start(). */
  halt(): Promise<void>;
  /** Starts a halted server again (crash recovery), on the same port. */
  start(): Promise<void>;
}

export interface PostgresStandby extends PostgresServer {
  /** Ends recovery: the standby becomes a read-write primary (pg_ctl promote -w). */
  promote(): Promise<void>;
}

export interface StartPostgresOptions {
  /** Extra postgresql.conf lines, e.g. { max_connections: '40' }. */
  readonly settings?: Readonly<Record<string, string>>;
  /**
   * The test role's password: TCP connections must then give it (scram-sha-256), while the
   * harness's own connections keep using the trusted unix socket. Handed to initdb in a file.
   */
  readonly password?: string;
}

const running = new Set<ServerFolder>();
let exitHookInstalled = false;

interface ServerFolder {
  readonly root: string;
  readonly dataDir: string;
  stopped: boolean;
}

/**
 * The bin folder of Debian's PostgreSQL (where initdb really is: a PATH entry may be a symbolic
 * link to it, without pg_basebackup beside it), or undefined when it is not installed.
 */
export function postgresBinDir(): string | undefined {
  const initdb = toolPath('initdb');
  return initdb === undefined ? undefined : dirname(realpathSync(initdb));
}

function binDir(): string {
  const dir = postgresBinDir();
  if (dir === undefined) throw new Error('PostgreSQL is not installed (Debian package postgresql-15): skip with skipUnlessTool("initdb") first');
  return dir;
}

interface RunAs {
  readonly uid: number;
  readonly gid: number;
}

/** Root runs the server as `postgres`; anyone else as themselves. */
function serverUser(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((entry) => entry.startsWith('postgres:'));
  const fields = line?.split(':');
  if (fields === undefined || fields.length < 4) throw new Error('running as root and there is no postgres user to run PostgreSQL as (Debian package postgresql-15 creates it)');
  return { uid: Number(fields[2]), gid: Number(fields[3]) };
}

function run(program: string, args: readonly string[], runAs: RunAs | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(program.includes('/') ? program : join(binDir(), program), args, {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C', LC_ALL: 'C', TZ: 'UTC' },
      ...(runAs ?? {}),
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${program} ${args.join(' ')} failed (${signal ?? code}): ${stderr.trim()}`));
    });
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function newFolder(label: string, runAs: RunAs | undefined): ServerFolder {
  const root = mkdtempSync(join(tmpdir(), `fermata-pg-${label}-`));
  if (runAs !== undefined) chownSync(root, runAs.uid, runAs.gid);
  const folder = { root, dataDir: join(root, 'data'), stopped: false };
  running.add(folder);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', stopAllNow);
    // A test runner or `timeout` ends a test process with SIGTERM (or SIGINT), which skips 'exit':
    // the servers are stopped, then the signal is raised again to end the process as it would have.
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      process.once(signal, () => {
        stopAllNow();
        process.kill(process.pid, signal);
      });
    }
  }
  return folder;
}

/** At process exit nothing can be awaited: SIGQUIT (immediate shutdown) to each postmaster, then its folder goes. */
function stopAllNow(): void {
  for (const folder of running) {
    quitPostmaster(folder);
    rmSync(folder.root, { recursive: true, force: true, maxRetries: 5 });
  }
  running.clear();
}

/** SIGQUIT (immediate shutdown) to the postmaster, then waits (synchronously: exit handlers cannot await) up to 5 s for it to be gone. */
function quitPostmaster(folder: ServerFolder): void {
  let pid: number;
  try {
    pid = Number(readFileSync(join(folder.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    if (!(pid > 0)) return;
    process.kill(pid, 'SIGQUIT');
  } catch {
    // No pid file, or no such process: the server is not running.
    return;
  }
  const nap = new Int32Array(new SharedArrayBuffer(4));
  for (let waited = 0; waited < 5000; waited += 20) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    Atomics.wait(nap, 0, 0, 20);
  }
}

function conf(lines: Readonly<Record<string, string>>): string {
  return Object.entries(lines)
    .map(([name, value]) => `${name} = '${value}'\n`)
    .join('');
}

function serverSettings(folder: ServerFolder, port: number, extra: Readonly<Record<string, string>>): Record<string, string> {
  return {
    listen_addresses: '127.0.0.1',
    port: String(port),
    unix_socket_directories: folder.root,
    fsync: 'on',
    synchronous_commit: 'on',
    full_page_writes: 'on',
    max_connections: '60',
    shared_buffers: '32MB',
    max_wal_size: '256MB',
    logging_collector: 'off',
    ...extra,
  };
}

function serverHandle(folder: ServerFolder, port: number, runAs: RunAs | undefined): PostgresServer {
  const urlOf = (database: string): string => `postgres://${postgresTestUser}@127.0.0.1:${port}/${database}`;
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (!folder.stopped) {
        folder.stopped = true;
        await run('pg_ctl', ['-D', folder.dataDir, '-m', 'immediate', '-w', 'stop'], runAs).catch(() => quitPostmaster(folder));
      }
      // Retried: a backend of the server just stopped may still be letting go of its files.
      rmSync(folder.root, { recursive: true, force: true, maxRetries: 5 });
      running.delete(folder);
    })();
    return stopping;
  };
  return {
    dir: folder.root,
    port,
    url: urlOf('postgres'),
    urlOf,
    async createDatabase(name) {
      const sql = postgres({ host: folder.root, port, user: postgresTestUser, database: 'postgres', max: 1, onnotice: () => {} });
      try {
        await sql.unsafe(`CREATE DATABASE "${name.replaceAll('"', '""')}"`);
      } finally {
        await sql.end();
      }
      return urlOf(name);
    },
    stop,
    async halt() {
      await run('pg_ctl', ['-D', folder.dataDir, '-m', 'immediate', '-w', 'stop'], runAs);
    },
    async start() {
      await startServer(folder, runAs);
    },
  };
}

async function startServer(folder: ServerFolder, runAs: RunAs | undefined): Promise<void> {
  await run('pg_ctl', ['-D', folder.dataDir, '-l', join(folder.root, 'server.log'), '-w', '-t', '60', 'start'], runAs);
}

/**
 * initdb into `dataDir`. --no-sync: initdb's own flush of the fresh files is not what the tests
 * rely on; the server itself runs with fsync on.
 */
function initdb(dataDir: string, auth: readonly string[], runAs: RunAs | undefined): Promise<void> {
  return run('initdb', ['-D', dataDir, '-U', postgresTestUser, ...auth, '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions'], runAs);
}

/**
 * The data directory initdb makes without a password, for this PostgreSQL build (its bin folder
 * and `postgres --version`) and server user, made when no test process has made it yet.
 */
async function trustTemplate(runAs: RunAs | undefined): Promise<string> {
  const postgresProgram = join(binDir(), 'postgres');
  const version = execFileSync(postgresProgram, ['--version'], { encoding: 'utf8' }).trim();
  const key = createHash('sha256').update(`${postgresProgram}\n${version}\n${runAs?.uid ?? process.getuid?.() ?? ''}`).digest('hex').slice(0, 16);
  const template = join(tmpdir(), `fermata-pg-template-${key}`);
  if (existsSync(join(template, 'PG_VERSION'))) return template;
  const building = mkdtempSync(`${template}.building-`);
  try {
    if (runAs !== undefined) chownSync(building, runAs.uid, runAs.gid);
    const dataDir = join(building, 'data');
    await initdb(dataDir, ['--auth=trust'], runAs);
    try {
      renameSync(dataDir, template);
    } catch (err) {
      if (!existsSync(join(template, 'PG_VERSION'))) throw err; // else another test process got there first: use its template
    }
  } finally {
    rmSync(building, { recursive: true, force: true });
  }
  return template;
}

/** Makes a new server's data directory: a copy of the template, or initdb's own with a password. */
async function newDataDir(folder: ServerFolder, password: string | undefined, runAs: RunAs | undefined): Promise<void> {
  if (password === undefined) {
    // cp -a keeps the owner (the postgres user) and the modes the server insists on.
    await run('/bin/cp', ['-a', await trustTemplate(runAs), folder.dataDir], undefined);
    return;
  }
  const passwordFile = join(folder.root, 'password');
  writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
  if (runAs !== undefined) chownSync(passwordFile, runAs.uid, runAs.gid);
  await initdb(folder.dataDir, ['--auth-local=trust', '--auth-host=scram-sha-256', `--pwfile=${passwordFile}`], runAs);
}

/** Makes a data directory and starts a new server (the caller stops it in an `after` hook). */
export async function startPostgres(options: StartPostgresOptions = {}): Promise<PostgresServer> {
  const runAs = serverUser();
  const folder = newFolder('primary', runAs);
  await newDataDir(folder, options.password, runAs);
  const port = await freePort();
  appendFileSync(join(folder.dataDir, 'postgresql.conf'), conf(serverSettings(folder, port, options.settings ?? {})));
  await startServer(folder, runAs);
  return serverHandle(folder, port, runAs);
}

/**
 * A streaming standby of `primary` (which this makes wait for it: synchronous_standby_names),
 * started and caught up before it resolves.
 */
export async function startStandby(primary: PostgresServer, name = 'standby1'): Promise<PostgresStandby> {
  const runAs = serverUser();
  const folder = newFolder(name, runAs);
  await run('pg_basebackup', ['-D', folder.dataDir, '-R', '-X', 'stream', '-c', 'fast', '-h', primary.dir, '-p', String(primary.port), '-U', postgresTestUser, '--no-sync'], runAs);
  const port = await freePort();
  // The copied postgresql.conf carries the primary's port and socket: later lines win.
  // cluster_name is the walreceiver's application_name, the name synchronous_standby_names lists.
  appendFileSync(join(folder.dataDir, 'postgresql.conf'), conf(serverSettings(folder, port, { cluster_name: name, hot_standby: 'on' })));
  await startServer(folder, runAs);
  const handle = serverHandle(folder, port, runAs);

  const sql = postgres({ host: primary.dir, port: primary.port, user: postgresTestUser, database: 'postgres', max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`ALTER SYSTEM SET synchronous_standby_names = '${name}'`);
    await sql`SELECT pg_reload_conf()`;
    const deadline = Date.now() + 30_000;
    for (;;) {
      const rows = await sql`SELECT sync_state FROM pg_stat_replication WHERE application_name = ${name}`;
      if (rows[0]?.sync_state === 'sync') break;
      if (Date.now() > deadline) throw new Error(`standby ${name} is not a synchronous standby of port ${primary.port} after 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    await sql.end();
  }
  return {
    ...handle,
    async promote() {
      await run('pg_ctl', ['-D', folder.dataDir, '-w', '-t', '60', 'promote'], runAs);
    },
  };
}

/** One URL naming several servers, for failover: the client takes the one that accepts writes. */
export function multiHostUrl(servers: readonly PostgresServer[], database = 'postgres'): string {
  const hosts = servers.map((server) => `127.0.0.1:${server.port}`).join(',');
  return `postgres://${postgresTestUser}@${hosts}/${database}?target_session_attrs=read-write`;
}
