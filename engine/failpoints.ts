// Named failpoints: moments where a crash is most telling, at which a test can have the real
// process kill itself (SIGKILL, as `kill -9`: the page cache stays, like the random kill of
// test/reliability/kill9-under-load.test.ts). Any thread; the count is per thread.
//
//   FERMATA_FAILPOINTS=wal.synced-before-ack@3,checkpoint.runs-written
//     → SIGKILL at the 3rd hit of wal.synced-before-ack, or the 1st of checkpoint.runs-written
//
// The variable is read once, when this module loads. Unset (production), `failpoint()` returns
// after one test of a module-level constant. A name it does not know stops the process at start
// (a typo must not quietly turn a test's failpoint off). Before the kill, one line goes to stderr
// synchronously, naming the point and the hit, so a test can tell this kill from a crash.
import { writeSync } from 'node:fs';

/** Every failpoint, with why a crash at that moment matters. */
export const failpoints = {
  'wal.written-before-sync': 'a group is written but not fdatasynced: no append acknowledged, the records may be read back',
  'wal.synced-before-ack': 'a group is durable but no append acknowledged: recovery keeps records no client heard of',
  'wal.segment-created-empty': 'a new segment file exists with no header yet: recovery must set it aside, not call the log corrupt',
  'checkpoint.runs-written': 'spill runs are on disk but no manifest names them: the old checkpoint and the whole log rule',
  'spill.manifest-before-rename': 'MANIFEST.tmp is written and synced but not renamed: the old manifest rules, the tmp is litter',
  'checkpoint.manifest-installed': 'the new manifest is durable and the log still holds what it covers: replay must not apply it twice',
  'checkpoint.segments-deleted': 'covered segments are gone and runs the new manifest dropped still lie about: they must be ignored',
  'reschedule.before-append': 'a PATCH took its timer out of the heap but logged nothing: after restart the timer is as it was, at its old time',
  'reschedule.after-append': 'a RESCHEDULE is durable but the PATCH not answered: after restart the timer is the new one, never also the old',
  'delivery.outcome-before-append': 'a target got its delivery but the outcome is not logged: after restart it is delivered again',
} as const;

export type FailpointName = keyof typeof failpoints;

export const failpointNames = Object.keys(failpoints) as FailpointName[];

/**
 * The failpoints a FERMATA_FAILPOINTS value arms, each with the hit that kills (1 when no `@N`).
 * Throws on an unknown name or a bad count, naming what it accepts.
 */
export function parseFailpoints(text: string | undefined): ReadonlyMap<FailpointName, number> {
  const armed = new Map<FailpointName, number>();
  if (text === undefined || text.trim() === '') return armed;
  for (const entry of text.split(',')) {
    const [name = '', count, ...rest] = entry.trim().split('@');
    if (!isFailpointName(name)) throw new Error(`FERMATA_FAILPOINTS: unknown failpoint "${name}"; known: ${failpointNames.join(', ')}`);
    if (rest.length > 0 || (count !== undefined && !/^[1-9]\d{0,8}$/.test(count))) {
      throw new Error(`FERMATA_FAILPOINTS: "${entry.trim()}" must be NAME or NAME@N, N a whole number from 1`);
    }
    armed.set(name, count === undefined ? 1 : Number(count));
  }
  return armed;
}

function isFailpointName(name: string): name is FailpointName {
  return Object.hasOwn(failpoints, name);
}

const armed = parseFailpoints(process.env.FERMATA_FAILPOINTS);
/** False unless FERMATA_FAILPOINTS armed something: the only test `failpoint()` makes in production. */
export const failpointsArmed = armed.size > 0;
const hits = new Map<FailpointName, number>();

/** Marks the moment `name`; kills this process here when FERMATA_FAILPOINTS says so. */
export function failpoint(name: FailpointName): void {
  if (!failpointsArmed) return;
  const killAt = armed.get(name);
  if (killAt === undefined) return;
  const hit = (hits.get(name) ?? 0) + 1;
  hits.set(name, hit);
  if (hit < killAt) return;
  writeSync(2, `${JSON.stringify({ msg: 'failpoint: SIGKILL', failpoint: name, hit, pid: process.pid })}\n`);
  process.kill(process.pid, 'SIGKILL');
}
