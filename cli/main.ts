// The `fermata` command line: picks the subcommand and returns the process exit code
// (bin/fermata.js sets process.exitCode from it). 0 success, 1 failure at run time, 2 usage.
// Each subcommand's module is imported when it is asked for: `fermata serve` does not load the
// load generator of `fermata bench`, nor `--version` the service.
import { readFileSync } from 'node:fs';

export const usage = `Usage: fermata <command> [options]

Commands:
  serve      run the timer service (fermata serve --help for its options)
  wal-dump   read a WAL directory without changing it: segments, records, where they stop
  bench      load a running fermata and report rates and latencies (fermata bench --help)
  cluster    create, migrate, inspect and import into a cluster database (fermata cluster --help)
  backup     copy a data directory, while the service runs, into a folder or a .tar file
  restore    make a backup into a new data directory (fermata restore --help)

Against a running fermata (--url or FERMATA_URL, --token or FERMATA_TOKEN; docs/cli.md; each
command's --help has an example):
  add        add a timer: fermata add --target URL --in 30m --payload TEXT
  get        show a timer
  cancel     cancel a timer
  reschedule change a pending timer's time, target, payload, headers or queue
  ls         list timers by filter, as a table or --json
  dead       dead letters: ls, retry
  queues     ls, set, pause, resume
  schedules  ls, get, set, rm, pause, resume
  stats      counts by state (--watch to follow them)
  import     add the timers of an .arrow/.arrows, .parquet, .csv or .ndjson file, resumably

  -h, --help       this text
  -v, --version    the version of fermata (package.json's)
`;

/** package.json's "version": the one place the version is written. */
export function fermataVersion(): string {
  const manifest: unknown = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  const version = typeof manifest === 'object' && manifest !== null && 'version' in manifest ? manifest.version : undefined;
  if (typeof version !== 'string') throw new Error('package.json has no "version" string');
  return version;
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'serve':
      return (await import('./serve/command.ts')).serve(rest);
    case 'wal-dump':
      return (await import('./wal-dump.ts')).walDump(rest);
    case 'bench':
      return (await import('./bench.ts')).bench(rest);
    case 'cluster':
      return (await import('./cluster.ts')).cluster(rest);
    case 'backup':
      return (await import('./backup.ts')).backup(rest, fermataVersion());
    case 'restore':
      return (await import('./restore.ts')).restore(rest);
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(usage);
      return 0;
    case '-v':
    case '--version':
      process.stdout.write(`${fermataVersion()}\n`);
      return 0;
    case undefined:
      process.stderr.write(usage);
      return 2;
    case 'add':
    case 'get':
    case 'cancel':
    case 'reschedule':
    case 'ls':
    case 'dead':
    case 'queues':
    case 'schedules':
    case 'stats':
    case 'import':
      return (await import('./commands/program.ts')).runHumanCommand(argv);
    default:
      process.stderr.write(`fermata: unknown command "${command}"\n\n${usage}`);
      return 2;
  }
}
