// `fermata cluster init|migrate|status|import`: the operator's commands for a cluster database.
//   init --partitions P   create the schema and the cluster with P partitions (default 32);
//                         on an existing cluster with the same P nothing changes, another P is refused
//   migrate               bring an existing cluster's schema to this build's version
//   status [--json]       partitions, owners, epochs, leases, log sizes (and nodes, once there)
//   import --data DIR     a stopped single node's data directory into the cluster as partition 0
// The database is --cluster URL or FERMATA_CLUSTER_URL; a password is never taken from the
// command line (cluster/connection.ts). Exit 0 success, 1 failure, 2 usage or a refused request.
import { parseArgs } from 'node:util';
import type { Sql } from 'postgres';
import { defaultPartitions, initCluster, maxPartitions } from '../cluster/cluster-init.ts';
import { type ClusterStatus, readClusterStatus } from '../cluster/cluster-status.ts';
import { chooseClusterUrl, clusterUrlEnv, openClusterPool } from '../cluster/connection.ts';
import { migrate } from '../cluster/schema/migrate.ts';
import { runImport } from './cluster-import.ts';

export const clusterUsage = `Usage: fermata cluster <command> [--cluster URL] [options]

Commands:
  init [--partitions P]   create the cluster in the database: its schema and P partitions
                          (default ${defaultPartitions}, at most ${maxPartitions}; fixed for the cluster's life)
  migrate                 bring the cluster's schema to this fermata's version
  status [--json]         partitions, owners, epochs, leases and log sizes
  import --data DIR       move a single node's data directory (the service stopped) into the
                          cluster as partition 0: its timers keep their ids; every node stopped

The database: --cluster postgres://user@host[:port][,host2[:port]]/db[?sslmode=…], or ${clusterUrlEnv}.
The password is never accepted on the command line: PGPASSWORD, ${clusterUrlEnv}, or ~/.pgpass.
`;

export interface ClusterCommandIo {
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
  readonly env: NodeJS.ProcessEnv;
}

const processIo: ClusterCommandIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  env: process.env,
};

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    options: {
      cluster: { type: 'string' },
      partitions: { type: 'string' },
      json: { type: 'boolean' },
      data: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: true,
  });
}

export async function cluster(argv: readonly string[], io: ClusterCommandIo = processIo): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (err) {
    io.err(`fermata cluster: ${(err as Error).message}\n\n${clusterUsage}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...extra] = positionals;
  if (values.help === true) {
    io.out(clusterUsage);
    return 0;
  }
  if (command === undefined || !['init', 'migrate', 'status', 'import'].includes(command) || extra.length > 0) {
    io.err(`fermata cluster: ${command === undefined ? 'which command?' : `unknown command "${[command, ...extra].join(' ')}"`}\n\n${clusterUsage}`);
    return 2;
  }
  let partitions = defaultPartitions;
  if (values.partitions !== undefined) {
    if (command !== 'init') return usageError(io, '--partitions is an option of init');
    partitions = Number(values.partitions);
    if (!/^\d+$/.test(values.partitions) || partitions < 1 || partitions > maxPartitions) {
      return usageError(io, `--partitions must be an integer from 1 to ${maxPartitions}, not "${values.partitions}"`);
    }
  }
  if ((values.data !== undefined) !== (command === 'import')) return usageError(io, command === 'import' ? 'import needs --data DIR' : '--data is an option of import');
  const choice = chooseClusterUrl(values.cluster, io.env);
  if (choice.kind === 'refused') return usageError(io, choice.message);

  const sql = openClusterPool(choice.url, { max: 2 });
  try {
    switch (command) {
      case 'init':
        return await runInit(sql, partitions, io);
      case 'migrate':
        return await runMigrate(sql, io);
      case 'import':
        return await runImport(sql, values.data as string, io);
      default:
        return await runStatus(sql, values.json === true, io);
    }
  } catch (err) {
    io.err(`fermata cluster ${command}: ${(err as Error).message}\n`);
    return 1;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

function usageError(io: ClusterCommandIo, message: string): number {
  io.err(`fermata cluster: ${message}\n`);
  return 2;
}

async function runInit(sql: Sql, partitions: number, io: ClusterCommandIo): Promise<number> {
  const result = await initCluster(sql, partitions);
  switch (result.kind) {
    case 'created':
      io.out(`created a cluster of ${result.partitions} partitions (schema version ${result.schemaTo})\n`);
      return 0;
    case 'exists':
      io.out(`the cluster exists with ${result.partitions} partitions (schema version ${result.schemaTo}${result.schemaFrom < result.schemaTo ? `, migrated from ${result.schemaFrom}` : ''})\n`);
      return 0;
    case 'partitions-differ':
      io.err(`fermata cluster init: the cluster exists with ${result.partitions} partitions; its partition count is fixed, and ${result.asked} were asked for\n`);
      return 2;
  }
}

async function runMigrate(sql: Sql, io: ClusterCommandIo): Promise<number> {
  const result = await migrate(sql);
  io.out(result.from === result.to ? `the schema is at version ${result.to} already\n` : `migrated the schema from version ${result.from} to ${result.to}\n`);
  return 0;
}

async function runStatus(sql: Sql, json: boolean, io: ClusterCommandIo): Promise<number> {
  const status = await readClusterStatus(sql);
  if (status === undefined) {
    io.err('fermata cluster status: the database holds no fermata cluster (create one with `fermata cluster init --partitions P`)\n');
    return 1;
  }
  io.out(json ? `${JSON.stringify(status, null, 2)}\n` : statusTable(status));
  return 0;
}

/** Columns padded to their widest cell, numbers on the right. */
function table(header: readonly string[], rows: readonly (readonly string[])[], rightAligned: ReadonlySet<number>): string {
  const widths = header.map((name, column) => Math.max(name.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells.map((cell, column) => (rightAligned.has(column) ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0))).join('  ').trimEnd() + '\n';
  return line(header) + rows.map(line).join('');
}

function statusTable(status: ClusterStatus): string {
  let text = `cluster: ${status.partitionCount} partitions, created ${status.createdAt}, schema version ${status.schemaVersion}` +
    (status.schemaVersion === status.knownSchemaVersion ? '' : ` (this fermata runs on ${status.knownSchemaVersion})`) + '\n\n';
  if (status.nodes !== null) {
    const columns = [...new Set(status.nodes.flatMap((node) => Object.keys(node)))];
    text += `nodes: ${status.nodes.length}\n`;
    if (status.nodes.length > 0) text += table(columns, status.nodes.map((node) => columns.map((name) => String(node[name] ?? '-'))), new Set()) + '\n';
  }
  const rows = status.partitions.map((p) => [
    String(p.partition), String(p.epoch), p.owner ?? '-', p.ownerAddress ?? '-', p.leaseUntil ?? '-',
    String(p.logRows), String(p.logBytes), p.firstSeq === null ? '-' : `${p.firstSeq}..${p.lastSeq}`,
    String(p.checkpointBytes),
  ]);
  return text + table(['partition', 'epoch', 'owner', 'address', 'lease_until', 'log_rows', 'log_bytes', 'log_seqs', 'checkpoint_bytes'], rows, new Set([0, 1, 5, 6, 8]));
}
