// The data directory's LOCK against real processes: an owner that died but was not reaped yet.
// A zombie is made the way a supervisor's kill -9 leaves one: its parent (here a shell blocked
// in `read`, which reaps its children only at `wait`) does not collect it, so kill(pid, 0) still
// finds the pid and /proc still shows its start time, in state Z.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { acquirePidLock } from '../../engine/fs/pid-lock.ts';
import { processState } from '../helpers/process-state.ts';
import { withTimeout } from '../helpers/timeout.ts';

const pidLockUrl = new URL('../../engine/fs/pid-lock.ts', import.meta.url).href;

/** Takes the lock on the directory in argv[1], says so, and holds it until killed. */
const lockHolder = `
const { acquirePidLock } = await import(${JSON.stringify(pidLockUrl)});
await acquirePidLock(process.argv[1], async () => undefined);
process.stdout.write('locked\\n');
setInterval(() => undefined, 60_000);
`;


test('restart refused after kill -9: a zombie owner of LOCK holds no lock', async (t) => {
  if (processState(process.pid) === undefined) {
    t.skip('no /proc here: the owner check cannot tell a zombie');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'fermata-lock-'));
  // The shell starts the holder in the background, prints its pid, and waits on stdin before reaping it.
  const parent = spawn('sh', ['-c', '"$0" --input-type=module -e "$1" "$2" & echo $!; read line; wait', process.execPath, lockHolder, dir], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  try {
    const lines = createInterface({ input: parent.stdout })[Symbol.asyncIterator]();
    const holderPid = Number((await withTimeout(lines.next(), 10_000, 'the holder pid')).value);
    assert.equal((await withTimeout(lines.next(), 10_000, 'the holder taking the lock')).value, 'locked');
    await assert.rejects(acquirePidLock(dir, async () => undefined), /in use by process/);

    process.kill(holderPid, 'SIGKILL');
    await withTimeout(
      (async () => {
        while (processState(holderPid) !== 'Z') await sleep(5);
      })(),
      10_000,
      'the holder becoming a zombie',
    );
    const lock = await acquirePidLock(dir, async () => undefined);
    await lock.release();
  } finally {
    parent.stdin.end();
    if (parent.exitCode === null) await once(parent, 'exit');
    rmSync(dir, { recursive: true, force: true });
  }
});
