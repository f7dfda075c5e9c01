// `fermata cluster import --data DIR`'s report to the operator (cluster/cluster-import.ts does the
// import). Exit 0 imported, 2 refused (the message names why; nothing was written to the cluster).
import type { Sql } from 'postgres';
import { ImportRefused, importDataDirectory } from '../cluster/cluster-import.ts';

/** Where the report goes (cli/cluster.ts's io). */
export interface ImportIo {
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
}

export async function runImport(sql: Sql, dataDir: string, io: ImportIo): Promise<number> {
  let report;
  try {
    report = await importDataDirectory(sql, dataDir);
  } catch (err) {
    if (!(err instanceof ImportRefused)) throw err;
    io.err(`fermata cluster import: refused: ${err.message}\n`);
    return 2;
  }
  const moved = Object.entries(report.schedulesMoved);
  io.out(
    `imported ${dataDir} as partition 0 of ${report.partitions} (epoch ${report.epoch}): ${report.pending} pending timers, ` +
    `${report.files} checkpoint files (${report.bytes} bytes), the log going on after sequence ${report.checkpointSeq}, ${report.queues} queue configs\n` +
    `schedules: ${report.schedulesKept} kept in partition 0` +
    (moved.length === 0 ? '' : `, ${moved.length} moved to their name's partition (${moved.map(([name, p]) => `${name} → ${p}`).join(', ')})`) + '\n' +
    `${dataDir} is left as it was, but for the checkpoint just taken (a single node reads it as its own); do not serve it again beside the cluster\n`,
  );
  return 0;
}
