// What the human commands share: the connection options every one of them takes (--url or
// FERMATA_URL, --token or FERMATA_TOKEN), a client made from them and closed after the command,
// the parsing of times, durations, numbers and headers given on the command line, and the
// error a bad flag value raises (exit status 2, as for every usage error of `fermata`).
import { FermataClient } from '../../clients/typescript/src/index.ts';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { parseDurationMs } from '../duration.ts';

export const defaultUrl = 'http://127.0.0.1:7070';

export interface ConnectionOptions {
  readonly url: string;
  readonly token?: string;
}

/** Adds --url and --token (with their environment variables) to a command that talks to fermata. */
export function connected(command: Command): Command {
  return command
    .addOption(new Option('--url <url>', 'the fermata to talk to').env('FERMATA_URL').default(defaultUrl))
    .addOption(new Option('--token <token>', 'bearer token, when the server asks for one').env('FERMATA_TOKEN'));
}

/** Runs `work` with a client of the command's --url and --token, closed afterwards. */
export async function withClient<T>(options: ConnectionOptions, work: (client: FermataClient) => Promise<T>): Promise<T> {
  const client = new FermataClient(options.token === undefined ? { url: options.url } : { url: options.url, token: options.token });
  try {
    return await work(client);
  } finally {
    await client.close();
  }
}

/** `--in 30s|2h|3d`: a duration with a unit, as ms. */
export function durationArg(text: string): number {
  const ms = parseDurationMs(text);
  if (ms === undefined) throw new InvalidArgumentError(`"${text}" is not a duration: a number and a unit, ms s m h d (30s, 2h, 3d)`);
  return ms;
}

/** `--at`: an RFC 3339 date-time (2026-12-08T09:00:00Z) or epoch ms, kept as given for the server to check. */
export function timeArg(text: string): string | number {
  if (/^\d+$/.test(text)) return Number(text);
  if (Number.isNaN(Date.parse(text))) throw new InvalidArgumentError(`"${text}" is not a time: an RFC 3339 date-time (2026-12-08T09:00:00Z) or epoch milliseconds`);
  return text;
}

export function wholeArg(text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`"${text}" is not a whole number`);
  return n;
}

export function positiveArg(text: string): number {
  const n = wholeArg(text);
  if (n === 0) throw new InvalidArgumentError('must be 1 or more');
  return n;
}

/** Collects a repeatable option's values. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** A mistake in the flags that only the command's action can see (two that exclude each other): exit status 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** `--header 'name: value'` (or `name=value`), repeatable, into the object the API takes. */
export function headersOf(lines: readonly string[] | undefined): Record<string, string> | undefined {
  if (lines === undefined || lines.length === 0) return undefined;
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const at = line.search(/[:=]/);
    if (at <= 0) throw new UsageError(`--header takes "name: value", not "${line}"`);
    headers[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
  }
  return headers;
}

/** Usage examples shown at the end of a command's --help. */
export function examples(command: Command, lines: readonly string[]): Command {
  return command.addHelpText('after', `\nExample${lines.length > 1 ? 's' : ''}:\n${lines.map((line) => `  $ ${line}`).join('\n')}\n`);
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}
