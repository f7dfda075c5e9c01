// One process per data directory. Node has no flock(2), and mkdir/mtime locks (the
// proper-lockfile approach) call a lock stale only after a timeout, which would make every
// restart after kill -9 wait. Instead the LOCK file names its owner by pid and the process
// start time from /proc: the owner is alive exactly when a process with that pid exists, started
// at that time and is not a zombie, so a lock left by a dead process is taken over at once and a
// reused pid is not mistaken for the owner. A process killed with kill -9 whose parent has not
// reaped it yet (its parent gone too, and init slow or not reaping) still answers kill(pid, 0)
// with its pid and start time, but it closed its files as it died: in state Z or X (the third
// field of /proc/PID/stat) it holds no lock.
//
// LOCK appears with its content in one step (written to a temporary file, then link(2)ed into
// place, which fails if LOCK exists), so no one ever reads an empty LOCK from a live owner.
// Taking over a stale lock unlinks it and retries the link. Two processes that start at the same
// moment on the same stale lock can still both get through (one unlinks the other's fresh LOCK
// between its read and its unlink): the race PostgreSQL's postmaster.pid accepts too. It needs
// two starts within microseconds on a directory whose owner died.
import { randomBytes } from 'node:crypto';
import { constants, promises as fsp } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { errorCodes, FermataError, systemErrorCode } from '../errors.ts';
import type { DirLock } from './file-system.ts';

const lockFileName = 'LOCK';
const takeoverAttemptsMax = 3;

interface LockOwner {
  readonly pid: number;
  readonly startTicks: string;
  readonly host: string;
}

/** The parts of /proc/PID/stat the owner check reads; undefined where there is no such file. */
interface ProcessStat {
  /** Field 3: R, S, D, … ; Z (zombie) and X (dead) hold no files. */
  readonly state: string;
  /** Field 22, starttime, in clock ticks after boot. */
  readonly startTicks: string;
}

const deadStates: ReadonlySet<string> = new Set(['Z', 'X']);

async function processStat(pid: number): Promise<ProcessStat | undefined> {
  try {
    const stat = await fsp.readFile(`/proc/${pid}/stat`, 'utf8');
    // The command name in field 2 may hold spaces, so fields are counted after its ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0] ?? '', startTicks: fields[19] ?? '' };
  } catch {
    return undefined;
  }
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return systemErrorCode(err) === 'EPERM';
  }
}

async function ownerAlive(owner: LockOwner): Promise<boolean> {
  if (owner.host !== hostname()) return true; // another machine's lock (shared storage): never steal it
  if (!processExists(owner.pid)) return false;
  const stat = await processStat(owner.pid);
  if (stat !== undefined && deadStates.has(stat.state)) return false;
  return owner.startTicks === '' || owner.startTicks === (stat?.startTicks ?? '');
}

function parseOwner(text: string): LockOwner | undefined {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== 'object' || value === null) return undefined;
    const { pid, startTicks, host } = value as Record<string, unknown>;
    if (typeof pid !== 'number' || typeof startTicks !== 'string' || typeof host !== 'string') return undefined;
    return { pid, startTicks, host };
  } catch {
    return undefined;
  }
}

export async function acquirePidLock(dir: string, syncDir: (dir: string) => Promise<void>): Promise<DirLock> {
  const path = join(dir, lockFileName);
  const me: LockOwner = { pid: process.pid, startTicks: (await processStat(process.pid))?.startTicks ?? '', host: hostname() };
  const text = JSON.stringify(me) + '\n';
  const staged = `${path}.${process.pid}.${randomBytes(6).toString('hex')}`;
  const handle = await fsp.open(staged, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o644);
  try {
    await handle.writeFile(text);
    await handle.datasync();
  } finally {
    await handle.close();
  }
  try {
    return await linkStaged(dir, path, staged, text, syncDir);
  } finally {
    await fsp.unlink(staged).catch(() => undefined);
  }
}

async function linkStaged(dir: string, path: string, staged: string, text: string, syncDir: (dir: string) => Promise<void>): Promise<DirLock> {
  for (let attempt = 0; attempt < takeoverAttemptsMax; attempt++) {
    try {
      await fsp.link(staged, path);
      await syncDir(dir);
      return { release: () => releasePidLock(path, text) };
    } catch (err) {
      if (systemErrorCode(err) !== 'EEXIST') throw err;
    }
    const existing = await fsp.readFile(path, 'utf8').catch(() => '');
    const owner = parseOwner(existing);
    // LOCK is never linked in before its content is durable, so an unparseable one is damage, not a live owner mid-write.
    if (owner !== undefined && (await ownerAlive(owner))) {
      const hint = owner.host === hostname() ? '' : ` (if that host is gone for good, remove ${path})`;
      throw new FermataError(errorCodes.dataDirLocked, `data directory ${dir} is in use by process ${owner.pid} on ${owner.host}${hint}`, {
        file: path,
        pid: owner.pid,
      });
    }
    await fsp.unlink(path).catch((err: unknown) => {
      if (systemErrorCode(err) !== 'ENOENT') throw err;
    });
  }
  throw new FermataError(errorCodes.dataDirLocked, `data directory ${dir}: lost the race for a stale lock ${takeoverAttemptsMax} times`, { file: path });
}

async function releasePidLock(path: string, text: string): Promise<void> {
  const current = await fsp.readFile(path, 'utf8').catch(() => '');
  if (current === text) await fsp.unlink(path);
}
