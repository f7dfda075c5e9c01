// The operator's commands: dead letters (ls, retry), queues (ls, set, pause, resume),
// schedules (ls, get, set, rm, pause, resume) and stats (once, or --watch). Each is a call of
// @fermata/client; output is a table or a few lines, or the API's JSON with --json.
import type { Queue, QueueConfig, Schedule, ScheduleInput, Stats } from '../../clients/typescript/src/index.ts';
import { type Command, Option } from 'commander';
import { collect, UsageError, type ConnectionOptions, connected, durationArg, examples, headersOf, positiveArg, printJson, timeArg, wholeArg, withClient } from './common.ts';
import { table } from './table.ts';

type JsonOption = ConnectionOptions & { json?: boolean };

function queueRow(queue: Queue): string[] {
  const show = (value: number | null): string => (value === null ? '-' : String(value));
  return [queue.name, queue.paused ? 'paused' : 'running', String(queue.max_attempts), `${queue.min_backoff_ms}..${queue.max_backoff_ms}`, show(queue.rate_per_s), show(queue.max_concurrent)];
}

function printQueue(queue: Queue, json: boolean | undefined): void {
  if (json === true) printJson(queue);
  else process.stdout.write(table(['name', 'state', 'max_attempts', 'backoff_ms', 'rate_per_s', 'max_concurrent'], [queueRow(queue)]));
}

function describeSchedule(schedule: Schedule): string {
  const rule = schedule.cron !== undefined ? `cron "${schedule.cron}" in ${schedule.time_zone ?? 'UTC'}` : `every ${schedule.every_ms} ms`;
  const next = schedule.next.map((occurrence) => `  ${occurrence.fire_at}`).join('\n');
  return `${schedule.name}: ${rule} → ${schedule.target} (queue ${schedule.queue})${schedule.paused ? ', paused' : ''}\nnext:\n${next}\n`;
}

function statsText(stats: Stats): string {
  return table(
    ['pending', 'resident', 'spilled', 'in_flight', 'delivered', 'dead', 'cancelled', 'held'],
    [[stats.pending, stats.resident, stats.spilled, stats.in_flight, stats.delivered, stats.dead, stats.cancelled, stats.held].map(String)],
  );
}

export function adminCommands(program: Command): void {
  const dead = program.command('dead').description('dead letters: timers that ran out of attempts');
  examples(dead, ['fermata dead ls --queue billing', 'fermata dead retry 01jf3k8q2m7xv4c9n6t5r0w8yz']);
  const deadLs = connected(dead.command('ls'))
    .description('list dead timers, oldest first')
    .option('--queue <name>', 'in this queue')
    .option('--limit <n>', 'timers shown at most', positiveArg, 100)
    .option('--json', 'one JSON timer a line')
    .action((options: JsonOption & { queue?: string; limit: number }) =>
      withClient(options, async (client) => {
        const rows: string[][] = [];
        let count = 0;
        for await (const timer of client.dead(options.queue === undefined ? {} : { queue: options.queue }, { pageSize: Math.min(options.limit, 1000) })) {
          if (options.json === true) printJson(timer);
          else rows.push([timer.id, timer.queue, String(timer.attempts), timer.reason, timer.last_error ?? '', timer.target]);
          if (++count >= options.limit) break;
        }
        if (options.json !== true) process.stdout.write(rows.length === 0 ? 'no dead timers\n' : table(['id', 'queue', 'attempts', 'reason', 'last_error', 'target'], rows));
      }),
    );
  examples(deadLs, ['fermata dead ls --queue billing']);
  const deadRetry = connected(dead.command('retry'))
    .description('redrive a dead timer: due now, attempts from zero')
    .argument('<id>')
    .action((id: string, options: ConnectionOptions) =>
      withClient(options, async (client) => {
        const retried = await client.retryDead(id);
        process.stdout.write(`${retried.id} ${retried.state}\n`);
      }),
    );
  examples(deadRetry, ['fermata dead retry 01jf3k8q2m7xv4c9n6t5r0w8yz']);

  const queues = program.command('queues').description('queues: retry policy, rate and concurrency limits, pause');
  examples(queues, ['fermata queues ls', 'fermata queues set billing --max-attempts 10 --rate 50', 'fermata queues pause billing']);
  const queuesLs = connected(queues.command('ls'))
    .description('list the queues with their config')
    .option('--json', "the API's JSON")
    .action((options: JsonOption) =>
      withClient(options, async (client) => {
        const all = await client.queues();
        if (options.json === true) printJson(all);
        else process.stdout.write(table(['name', 'state', 'max_attempts', 'backoff_ms', 'rate_per_s', 'max_concurrent'], all.map(queueRow)));
      }),
    );
  examples(queuesLs, ['fermata queues ls']);
  const queuesSet = connected(queues.command('set'))
    .description("set a queue's whole config (what is left out takes its default)")
    .argument('<name>')
    .option('--max-attempts <n>', 'attempts before a timer is dead', positiveArg)
    .option('--min-backoff <duration>', 'first wait between attempts', durationArg)
    .option('--max-backoff <duration>', 'longest wait between attempts', durationArg)
    .option('--max-doublings <n>', 'times the wait doubles', wholeArg)
    .option('--rate <n>', 'deliveries a second at most', positiveArg)
    .option('--max-concurrent <n>', 'deliveries in flight at most', positiveArg)
    .option('--timeout <duration>', 'how long a delivery may take', durationArg)
    .option('--retention <duration>', 'how long a delivered or cancelled timer and its key are kept', durationArg)
    .option('--dead-retention <duration>', 'how long a dead timer and its key are kept', durationArg)
    .option('--max-pending <n>', 'timers waiting at most; adds past it are refused (QUEUE_FULL)', positiveArg)
    .option('--json', "the API's JSON")
    .action((name: string, options: JsonOption & { maxAttempts?: number; minBackoff?: number; maxBackoff?: number; maxDoublings?: number; rate?: number; maxConcurrent?: number; timeout?: number; retention?: number; deadRetention?: number; maxPending?: number }) =>
      withClient(options, async (client) => {
        const config: QueueConfig = {};
        if (options.maxAttempts !== undefined) config.max_attempts = options.maxAttempts;
        if (options.minBackoff !== undefined) config.min_backoff_ms = options.minBackoff;
        if (options.maxBackoff !== undefined) config.max_backoff_ms = options.maxBackoff;
        if (options.maxDoublings !== undefined) config.max_doublings = options.maxDoublings;
        if (options.rate !== undefined) config.rate_per_s = options.rate;
        if (options.maxConcurrent !== undefined) config.max_concurrent = options.maxConcurrent;
        if (options.timeout !== undefined) config.timeout_ms = options.timeout;
        if (options.retention !== undefined) config.retention_ms = options.retention;
        if (options.deadRetention !== undefined) config.dead_retention_ms = options.deadRetention;
        if (options.maxPending !== undefined) config.max_pending = options.maxPending;
        printQueue(await client.setQueue(name, config), options.json);
      }),
    );
  examples(queuesSet, ['fermata queues set billing --max-attempts 10 --min-backoff 5s --max-backoff 1h --rate 50']);
  for (const [verb, description] of [
    ['pause', 'pause a queue: it takes timers and delivers none'],
    ['resume', 'resume a paused queue'],
  ] as const) {
    const command = connected(queues.command(verb))
      .description(description)
      .argument('<name>')
      .option('--json', "the API's JSON")
      .action((name: string, options: JsonOption) => withClient(options, async (client) => printQueue(verb === 'pause' ? await client.pauseQueue(name) : await client.resumeQueue(name), options.json)));
    examples(command, [`fermata queues ${verb} billing`]);
  }

  schedulesCommands(program);

  const stats = connected(program.command('stats'))
    .description('counts of timers by state, from the service')
    .addOption(new Option('--watch [seconds]', 'print them again every few seconds until stopped').argParser(positiveArg))
    .option('--json', "the API's JSON (a line each time)")
    .action((options: JsonOption & { watch?: number | true }) =>
      withClient(options, async (client) => {
        const everyMs = options.watch === undefined ? 0 : (options.watch === true ? 2 : options.watch) * 1000;
        for (;;) {
          const counts = await client.stats();
          if (options.json === true) printJson(counts);
          else process.stdout.write(`${options.watch === undefined ? '' : `${new Date().toISOString()}\n`}${statsText(counts)}`);
          if (everyMs === 0) return;
          await new Promise((resolve) => setTimeout(resolve, everyMs));
        }
      }),
    );
  examples(stats, ['fermata stats', 'fermata stats --watch 5']);
}

interface ScheduleSetOptions extends JsonOption {
  readonly cron?: string;
  readonly timeZone?: string;
  readonly every?: number;
  readonly target: string;
  readonly payload?: string;
  readonly header?: string[];
  readonly queue?: string;
  readonly startAt?: string | number;
  readonly endAt?: string | number;
  readonly jitter?: number;
  readonly catchUp?: 'latest' | 'all' | 'none';
}

function schedulesCommands(program: Command): void {
  const schedules = program.command('schedules').description('recurring timers: cron rules or fixed intervals');
  examples(schedules, ['fermata schedules set heartbeat --every 5m --target https://api.example/ping', 'fermata schedules ls']);
  const ls = connected(schedules.command('ls'))
    .description('list the schedules')
    .option('--json', 'one JSON schedule a line')
    .action((options: JsonOption) =>
      withClient(options, async (client) => {
        const rows: string[][] = [];
        for await (const schedule of client.schedules()) {
          if (options.json === true) printJson(schedule);
          else rows.push([schedule.name, schedule.cron !== undefined ? `cron ${schedule.cron} ${schedule.time_zone ?? ''}`.trim() : `every ${schedule.every_ms} ms`, schedule.paused ? 'paused' : 'running', schedule.next[0]?.fire_at ?? '-', schedule.target]);
        }
        if (options.json !== true) process.stdout.write(rows.length === 0 ? 'no schedules\n' : table(['name', 'rule', 'state', 'next', 'target'], rows));
      }),
    );
  examples(ls, ['fermata schedules ls']);
  const get = connected(schedules.command('get'))
    .description('show a schedule and its next five occurrences')
    .argument('<name>')
    .option('--json', "the API's JSON")
    .action((name: string, options: JsonOption) =>
      withClient(options, async (client) => {
        const schedule = await client.schedule(name);
        if (options.json === true) printJson(schedule);
        else process.stdout.write(describeSchedule(schedule));
      }),
    );
  examples(get, ['fermata schedules get daily-report']);
  const set = connected(schedules.command('set'))
    .description('create or replace a schedule')
    .argument('<name>')
    .option('--cron <expression>', 'a cron rule (5 or 6 fields)')
    .option('--time-zone <zone>', "the cron rule's IANA time zone (default UTC)")
    .option('--every <duration>', 'instead of --cron: a fixed interval (90s, 1h)', durationArg)
    .requiredOption('--target <url>', 'where each occurrence is POSTed')
    .option('--payload <text>', 'the body delivered')
    .option('--header <name: value>', 'a header added to each delivery; repeatable', collect)
    .option('--queue <name>', 'the queue of its timers')
    .option('--start-at <time>', 'no occurrence before', timeArg)
    .option('--end-at <time>', 'no occurrence after', timeArg)
    .option('--jitter <duration>', 'each occurrence moved by up to this much', durationArg)
    .addOption(new Option('--catch-up <mode>', 'occurrences missed while the service was down').choices(['latest', 'all', 'none']))
    .option('--json', "the API's JSON")
    .action((name: string, options: ScheduleSetOptions) =>
      withClient(options, async (client) => {
        if ((options.cron === undefined) === (options.every === undefined)) throw new UsageError('give --cron EXPRESSION or --every DURATION');
        const input: ScheduleInput = { target: options.target };
        if (options.cron !== undefined) input.cron = options.cron;
        if (options.timeZone !== undefined) input.time_zone = options.timeZone;
        if (options.every !== undefined) input.every_ms = options.every;
        if (options.payload !== undefined) input.payload = options.payload;
        const headers = headersOf(options.header);
        if (headers !== undefined) input.headers = headers;
        if (options.queue !== undefined) input.queue = options.queue;
        if (options.startAt !== undefined) input.start_at = options.startAt;
        if (options.endAt !== undefined) input.end_at = options.endAt;
        if (options.jitter !== undefined) input.jitter_ms = options.jitter;
        if (options.catchUp !== undefined) input.catch_up = options.catchUp;
        const schedule = await client.setSchedule(name, input);
        if (options.json === true) printJson(schedule);
        else process.stdout.write(describeSchedule(schedule));
      }),
    );
  examples(set, ['fermata schedules set daily-report --cron "0 9 * * MON-FRI" --time-zone Europe/Berlin --target https://api.example/report', 'fermata schedules set heartbeat --every 5m --target https://api.example/ping']);
  const rm = connected(schedules.command('rm'))
    .description('delete a schedule and cancel its pending occurrences')
    .argument('<name>')
    .action((name: string, options: ConnectionOptions) =>
      withClient(options, async (client) => {
        await client.deleteSchedule(name);
        process.stdout.write(`${name} deleted\n`);
      }),
    );
  examples(rm, ['fermata schedules rm daily-report']);
  for (const verb of ['pause', 'resume'] as const) {
    const command = connected(schedules.command(verb))
      .description(verb === 'pause' ? 'pause a schedule: no occurrences are made, pending ones are cancelled' : 'resume a schedule from now')
      .argument('<name>')
      .option('--json', "the API's JSON")
      .action((name: string, options: JsonOption) =>
        withClient(options, async (client) => {
          const schedule = verb === 'pause' ? await client.pauseSchedule(name) : await client.resumeSchedule(name);
          if (options.json === true) printJson(schedule);
          else process.stdout.write(describeSchedule(schedule));
        }),
      );
    examples(command, [`fermata schedules ${verb} daily-report`]);
  }
}
