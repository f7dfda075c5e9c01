// A process's state letter from /proc/PID/stat (R, S, D, Z for a zombie, …), for tests that wait
// for a killed process to become a zombie; undefined where there is no such process (or no /proc).
import { readFileSync } from 'node:fs';

export function processState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name in field 2 may hold spaces, so fields are counted after its ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return undefined;
  }
}
