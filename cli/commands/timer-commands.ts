// The timer commands: add, get, cancel, reschedule and ls, each a call of @fermata/client.
// Output is for people (a line, or a table) unless --json asks for the API's own JSON.
import { readFileSync } from 'node:fs';
import type { Timer, TimerChanges, TimerFilter, TimerInput, TimerState } from '../../clients/typescript/src/index.ts';
import { type Command, Option } from 'commander';
import { collect, UsageError, type ConnectionOptions, connected, durationArg, examples, headersOf, positiveArg, printJson, timeArg, wholeArg, withClient } from './common.ts';
import { table } from './table.ts';

const timerStates: readonly TimerState[] = ['pending', 'delivering', 'retrying', 'delivered', 'dead', 'cancelled'];

interface WhenOptions {
  readonly at?: string | number;
  readonly in?: number;
}

interface ContentOptions {
  readonly target?: string;
  readonly payload?: string;
  readonly payloadFile?: string;
  readonly header?: string[];
  readonly queue?: string;
}

interface AddOptions extends ConnectionOptions, WhenOptions, ContentOptions {
  readonly key?: string;
  readonly json?: boolean;
}

/** The payload of --payload or --payload-file (its bytes: text as payload, anything else as payload_base64). */
function payloadOf(options: ContentOptions): Pick<TimerInput, 'payload' | 'payload_base64'> {
  if (options.payload !== undefined && options.payloadFile !== undefined) throw new UsageError('give --payload or --payload-file, not both');
  if (options.payload !== undefined) return { payload: options.payload };
  if (options.payloadFile === undefined) return {};
  const bytes = readFileSync(options.payloadFile);
  const text = new TextDecoder('utf-8', { fatal: true });
  try {
    return { payload: text.decode(bytes) };
  } catch {
    return { payload_base64: bytes.toString('base64') };
  }
}

function whenOf(options: WhenOptions, required: boolean): Pick<TimerInput, 'fire_at' | 'delay_ms'> {
  if (options.at !== undefined && options.in !== undefined) throw new UsageError('give --at or --in, not both');
  if (options.at !== undefined) return { fire_at: options.at };
  if (options.in !== undefined) return { delay_ms: options.in };
  if (required) throw new UsageError('when to deliver: --at TIME or --in DURATION');
  return {};
}

function whenOptions(command: Command): Command {
  return command.option('--at <time>', 'when: an RFC 3339 date-time or epoch ms', timeArg).option('--in <duration>', 'when: this long from now (30s, 2h, 3d)', durationArg);
}

function contentOptions(command: Command): Command {
  return command
    .option('--payload <text>', 'the body delivered')
    .option('--payload-file <file>', 'the body delivered, read from a file (bytes kept as they are)')
    .option('--header <name: value>', 'a header added to the delivery; repeatable', collect)
    .option('--queue <name>', 'the queue whose retry policy and limits apply');
}

function describeTimer(timer: Timer): string {
  const lines: [string, unknown][] = [
    ['id', timer.id],
    ['state', timer.state],
    ['revision', timer.revision],
    ['fire_at', timer.fire_at],
    ['queue', timer.queue],
    ['key', timer.key],
    ['target', timer.target],
    ['attempts', timer.attempts],
    ['next_attempt_at', timer.next_attempt_at],
    ['last_status', timer.last_status],
    ['last_error', timer.last_error],
    ['headers', Object.keys(timer.headers).length === 0 ? null : JSON.stringify(timer.headers)],
    ['payload', timer.payload ?? (timer.payload_base64 === null ? null : `(base64) ${timer.payload_base64}`)],
    ['created_at', timer.created_at],
  ];
  return lines
    .filter(([, value]) => value !== null)
    .map(([name, value]) => `${`${name}:`.padEnd(17)}${String(value)}`)
    .join('\n') + '\n';
}

export function timerCommands(program: Command): void {
  const add = contentOptions(whenOptions(connected(program.command('add'))))
    .description('add a timer: POST its payload to --target at --at or --in')
    .requiredOption('--target <url>', 'where the payload is POSTed')
    .option('--key <key>', 'idempotency key: adding it again answers the first timer')
    .option('--json', "print the API's answer")
    .action((options: AddOptions) =>
      withClient(options, async (client) => {
        const headers = headersOf(options.header);
        const timer: TimerInput = { target: options.target as string, ...whenOf(options, true), ...payloadOf(options) };
        if (headers !== undefined) timer.headers = headers;
        if (options.key !== undefined) timer.key = options.key;
        if (options.queue !== undefined) timer.queue = options.queue;
        const added = await client.add(timer);
        if (options.json === true) printJson(added);
        else if (added.duplicate) process.stdout.write(`${added.id} (already there: key ${options.key} is ${added.state}${added.differs !== undefined && added.differs.length > 0 ? `, differs in ${added.differs.join(', ')}` : ''})\n`);
        else process.stdout.write(`${added.id} fires at ${added.fire_at}\n`);
      }),
    );
  examples(add, ['fermata add --target https://api.example/trial-end --in 30d --payload \'{"user":42}\' --key trial-42', 'fermata add --target https://api.example/hook --at 2026-12-24T18:00:00Z --header "x-tenant: acme" --queue billing']);

  const get = connected(program.command('get'))
    .description('show a timer')
    .argument('<id>')
    .option('--json', "print the API's JSON")
    .action((id: string, options: ConnectionOptions & { json?: boolean }) =>
      withClient(options, async (client) => {
        const timer = await client.get(id);
        if (options.json === true) printJson(timer);
        else process.stdout.write(describeTimer(timer));
      }),
    );
  examples(get, ['fermata get 01jf3k8q2m7xv4c9n6t5r0w8yz']);

  const cancel = connected(program.command('cancel'))
    .description('cancel a timer (refused once its delivery started)')
    .argument('<id>')
    .option('--revision <n>', 'only while the timer is at this revision', wholeArg)
    .action((id: string, options: ConnectionOptions & { revision?: number }) =>
      withClient(options, async (client) => {
        const cancelled = await client.cancel(id, options.revision === undefined ? {} : { revision: options.revision });
        process.stdout.write(`${cancelled.id} cancelled\n`);
      }),
    );
  examples(cancel, ['fermata cancel 01jf3k8q2m7xv4c9n6t5r0w8yz']);

  const reschedule = contentOptions(whenOptions(connected(program.command('reschedule'))))
    .description('change a pending timer: its time, target, payload, headers or queue')
    .argument('<id>')
    .option('--target <url>', 'where the payload is POSTed')
    .option('--revision <n>', 'compare-and-set: only while the timer is at this revision', wholeArg)
    .option('--json', 'print the timer as it is now, as JSON')
    .action((id: string, options: ConnectionOptions & WhenOptions & ContentOptions & { revision?: number; json?: boolean }) =>
      withClient(options, async (client) => {
        const changes: TimerChanges = { ...whenOf(options, false), ...payloadOf(options) };
        const headers = headersOf(options.header);
        if (headers !== undefined) changes.headers = headers;
        if (options.target !== undefined) changes.target = options.target;
        if (options.queue !== undefined) changes.queue = options.queue;
        if (Object.keys(changes).length === 0) throw new UsageError('nothing to change: give --at, --in, --target, --payload, --payload-file, --header or --queue');
        const timer = await client.reschedule(id, changes, options.revision === undefined ? {} : { revision: options.revision });
        if (options.json === true) printJson(timer);
        else process.stdout.write(`${timer.id} fires at ${timer.fire_at} (revision ${timer.revision})\n`);
      }),
    );
  examples(reschedule, ['fermata reschedule 01jf3k8q2m7xv4c9n6t5r0w8yz --in 2h', 'fermata reschedule 01jf3k8q2m7xv4c9n6t5r0w8yz --at 2026-12-24T18:00:00Z --revision 3']);

  const ls = connected(program.command('ls'))
    .description('list timers by when they are due, filtered as GET /v1/timers filters')
    .option('--queue <name>', 'in this queue')
    .addOption(new Option('--state <state>', 'in this state').choices(timerStates))
    .option('--key-prefix <prefix>', 'whose key starts so')
    .option('--key <key>', 'whose key is this')
    .option('--due-after <time>', 'due at or after this time', timeArg)
    .option('--due-before <time>', 'due before this time', timeArg)
    .option('--limit <n>', 'timers shown at most', positiveArg, 100)
    .option('--json', 'one JSON timer a line')
    .action((options: ConnectionOptions & { queue?: string; state?: TimerState; keyPrefix?: string; key?: string; dueAfter?: string | number; dueBefore?: string | number; limit: number; json?: boolean }) =>
      withClient(options, async (client) => {
        const filter: TimerFilter = {};
        if (options.queue !== undefined) filter.queue = options.queue;
        if (options.state !== undefined) filter.state = options.state;
        if (options.keyPrefix !== undefined) filter.key_prefix = options.keyPrefix;
        if (options.key !== undefined) filter.key = options.key;
        if (options.dueAfter !== undefined) filter.due_after = options.dueAfter;
        if (options.dueBefore !== undefined) filter.due_before = options.dueBefore;
        const rows: string[][] = [];
        let count = 0;
        for await (const timer of client.list(filter, { pageSize: Math.min(options.limit, 1000) })) {
          if (options.json === true) printJson(timer);
          else rows.push([timer.id, timer.state, timer.fire_at, timer.queue, String(timer.attempts), timer.key ?? '', timer.target]);
          if (++count >= options.limit) break;
        }
        if (options.json !== true) process.stdout.write(rows.length === 0 ? 'no timers\n' : table(['id', 'state', 'fire_at', 'queue', 'attempts', 'key', 'target'], rows));
      }),
    );
  examples(ls, ['fermata ls --queue billing --state retrying', 'fermata ls --due-before 2026-12-08T00:00:00Z --json']);
}
