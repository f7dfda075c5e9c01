// bin/fermata.js as a supervisor runs it on a machine whose own Node is older than the pinned
// one: the launcher starts the pinned Node as its child, in its own process group, and the
// whole group is signalled (systemd's default, a terminal's Ctrl-C, a test harness). Skipped
// where /usr/bin/node is missing or is itself new enough to run fermata without a child.
//
// The kill -9 test makes this process the group's subreaper (prctl PR_SET_CHILD_SUBREAPER): the
// server, orphaned when its launcher dies, becomes this process's child, and Node reaps only the
// children it started, so the server stays a zombie for as long as the test runs. That is the
// window a slow init leaves, held open: the restart meets a LOCK whose owner is a zombie.
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { binPath, serviceEnv } from '../helpers/service.ts';
import { testScratch } from '../helpers/scratch.ts';
import { processState } from '../helpers/process-state.ts';
import { withTimeout } from '../helpers/timeout.ts';

const olderNode = '/usr/bin/node';
const pinnedMajor = 26;
const startTimeoutMs = 30_000;
const exitTimeoutMs = 30_000;
const target = 'https://hooks.example/launcher';

const skip = launcherSkipReason();
const scratch = testScratch('fermata-launcher');
const groups = new Set<number>();
after(() => {
  for (const pid of groups) killGroup(pid, 'SIGKILL');
});

function launcherSkipReason(): string | undefined {
  if (!existsSync(olderNode)) return `${olderNode} is missing: no older Node to start the launcher with`;
  const major = Number(execFileSync(olderNode, ['-p', 'process.versions.node.split(".")[0]'], { encoding: 'utf8' }).trim());
  return major >= pinnedMajor ? `${olderNode} is Node ${major}: the launcher runs fermata in its own process, with no child to forward signals to` : undefined;
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // the group is gone already
  }
}

/** PR_SET_CHILD_SUBREAPER through node:ffi; false where it cannot be had (no glibc, no node:ffi). */
function becomeSubreaper(): boolean {
  const emitWarning = process.emitWarning;
  process.emitWarning = () => undefined;
  try {
    const ffi = process.getBuiltinModule('node:ffi') as
      | { dlopen(path: string, definitions: Record<string, { arguments: string[]; return: string }>): { functions: Record<string, (...args: (number | bigint)[]) => number> } }
      | undefined;
    const prctl = ffi?.dlopen('libc.so.6', { prctl: { arguments: ['int32', 'uint64', 'uint64', 'uint64', 'uint64'], return: 'int32' } }).functions.prctl;
    const prSetChildSubreaper = 36;
    return prctl !== undefined && prctl(prSetChildSubreaper, 1n, 0n, 0n, 0n) === 0;
  } catch {
    return false;
  } finally {
    process.emitWarning = emitWarning;
  }
}


type LogLine = Record<string, unknown> & { msg?: string };

interface Launched {
  readonly launcher: ChildProcess;
  readonly url: string;
  readonly lines: LogLine[];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** `/usr/bin/node bin/fermata.js serve` as the leader of a process group of its own, once it listens. */
async function launch(dataDir: string): Promise<Launched> {
  const launcher = spawn(olderNode, [binPath, 'serve', '--listen', '127.0.0.1:0', '--data', dataDir], { detached: true, env: serviceEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  groups.add(launcher.pid as number);
  const lines: LogLine[] = [];
  let output = '';
  launcher.stderr?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => launcher.on('close', (code, signal) => resolve({ code, signal })));
  const listening = new Promise<string>((resolve, reject) => {
    createInterface({ input: launcher.stdout as NodeJS.ReadableStream }).on('line', (text) => {
      output += text + '\n';
      try {
        const line = JSON.parse(text) as LogLine;
        lines.push(line);
        if (line.msg === 'listening' && typeof line.url === 'string') resolve(line.url);
      } catch {
        // not a log line
      }
    });
    void exited.then(() => reject(new Error(`fermata exited before listening:\n${output}`)));
  });
  const url = await withTimeout(listening, startTimeoutMs, 'the "listening" line');
  return { launcher, url, lines, exited };
}

async function addTimer(url: string, payload: string): Promise<string> {
  const answer = await fetch(`${url}/v1/timers`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ fire_at: Date.now() + 24 * 3600_000, target, payload }),
    signal: AbortSignal.timeout(10_000),
  });
  const body = await answer.text();
  assert.equal(answer.status, 201, body);
  return (JSON.parse(body) as { id: string }).id;
}

test('SIGTERM exits 1 without draining under an older Node: a SIGTERM to the process group drains and exits 0', { skip, timeout: 120_000 }, async () => {
  const service = await launch(scratch.tempDir('sigterm'));
  await addTimer(service.url, 'drained');
  killGroup(service.launcher.pid as number, 'SIGTERM');
  const exit = await withTimeout(service.exited, exitTimeoutMs, 'fermata to exit after SIGTERM to its group');
  const log = JSON.stringify(service.lines);
  assert.deepEqual(exit, { code: 0, signal: null }, log);
  assert.ok(service.lines.some((line) => line.msg === 'stopping' && line.signal === 'SIGTERM'), log);
  assert.ok(service.lines.some((line) => line.msg === 'stopped' && line.exitCode === 0), log);
  assert.ok(!service.lines.some((line) => line.level === 60), `no fatal line: ${log}`);
});

test('restart refused after kill -9: kill -9 of the process group, then an immediate restart serves every acknowledged timer', { skip, timeout: 120_000 }, async (t) => {
  const subreaper = becomeSubreaper();
  if (!subreaper) t.diagnostic('not a subreaper here: init may reap the killed server before the restart looks at LOCK');
  const dataDir = scratch.tempDir('kill9');
  const first = await launch(dataDir);
  const serverPid = first.lines.find((line) => line.msg === 'listening')?.pid;
  assert.equal(typeof serverPid, 'number');
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) ids.push(await addTimer(first.url, `acknowledged ${i}`));
  killGroup(first.launcher.pid as number, 'SIGKILL');
  await withTimeout(first.exited, exitTimeoutMs, 'the launcher to die of kill -9');
  if (subreaper) {
    const zombie = (async () => {
      while (processState(serverPid as number) !== 'Z') await sleep(5);
    })();
    await withTimeout(zombie, exitTimeoutMs, 'the killed server to be a zombie');
  }

  const second = await launch(dataDir);
  for (const id of ids) {
    const view = await fetch(`${second.url}/v1/timers/${id}`, { signal: AbortSignal.timeout(10_000) });
    assert.equal(view.status, 200, `timer ${id} after the restart`);
    assert.equal(((await view.json()) as { state: string }).state, 'pending');
  }
  // The launcher passes on how the server ended, as a shell reports it: 128 + 9 for kill -9.
  const secondPid = second.lines.find((line) => line.msg === 'listening')?.pid;
  assert.equal(typeof secondPid, 'number');
  process.kill(secondPid as number, 'SIGKILL');
  assert.deepEqual(await withTimeout(second.exited, exitTimeoutMs, 'the launcher to exit after its server was killed'), { code: 137, signal: null });
});
