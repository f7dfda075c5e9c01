// What a test file that spawns the service leaves behind: its child processes (killed when the
// file's tests end, if still running) and its temporary directories (removed then).
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';

export interface Scratch {
  /** Children to kill at the end: add each one spawned. */
  readonly children: Set<ChildProcess>;
  /** A new temporary directory, removed at the end. */
  tempDir(label: string): string;
}

export function testScratch(prefix: string): Scratch {
  const children = new Set<ChildProcess>();
  const dirs: string[] = [];
  after(() => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  return {
    children,
    tempDir(label) {
      const dir = mkdtempSync(join(tmpdir(), `${prefix}-${label}-`));
      dirs.push(dir);
      return dir;
    },
  };
}
