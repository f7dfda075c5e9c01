// The human commands of `fermata` (add, get, cancel, reschedule, ls, dead, queues, schedules,
// stats, import): one commander program, against a running service through @fermata/client.
// cli/main.ts hands it the arguments when the first one names one of these commands; serve,
// bench, cluster and wal-dump keep their own parsing. Exit status: 0 done, 1 the service or the
// file said no (the message names the code, field, row or value), 2 a usage mistake.
import { FermataError } from '../../clients/typescript/src/index.ts';
import { Command, CommanderError } from 'commander';
import { ImportError } from '../import/import-error.ts';
import { adminCommands } from './admin-commands.ts';
import { defaultUrl, UsageError } from './common.ts';
import { importCommand } from './import-command.ts';
import { timerCommands } from './timer-commands.ts';

export const humanCommandNames: readonly string[] = ['add', 'get', 'cancel', 'reschedule', 'ls', 'dead', 'queues', 'schedules', 'stats', 'import'];

function program(): Command {
  const root = new Command('fermata')
    .exitOverride()
    .showHelpAfterError('(add --help for the options and an example)')
    .configureOutput({ writeOut: (text) => process.stdout.write(text), writeErr: (text) => process.stderr.write(text) })
    .addHelpText('after', `\nEvery command takes --url (or FERMATA_URL; default ${defaultUrl}) and --token (or FERMATA_TOKEN).\n`);
  timerCommands(root);
  adminCommands(root);
  importCommand(root);
  return root;
}

/** What the service answered, in one line: its code, status, message and the field, row or line it named. */
function serviceError(err: FermataError): string {
  const where = [err.field === undefined ? '' : `field ${err.field}`, err.column === undefined ? '' : `column ${err.column}`, err.row === undefined ? '' : `row ${err.row}`, err.line === undefined ? '' : `line ${err.line}`].filter((part) => part !== '');
  return `${err.code}${err.status > 0 ? ` (${err.status})` : ''}: ${err.message}${where.length > 0 ? ` [${where.join(', ')}]` : ''}`;
}

export async function runHumanCommand(argv: readonly string[]): Promise<number> {
  try {
    await program().parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // commander has written the help or the usage error already.
      return err.code === 'commander.helpDisplayed' || err.code === 'commander.help' || err.code === 'commander.version' ? 0 : 2;
    }
    const command = `fermata ${argv[0] ?? ''}`;
    if (err instanceof UsageError) {
      process.stderr.write(`${command}: ${err.message}\n`);
      return 2;
    }
    if (err instanceof FermataError) process.stderr.write(`${command}: ${serviceError(err)}\n`);
    else if (err instanceof ImportError) process.stderr.write(`${command}: ${err.message}\n`);
    else if (err instanceof Error) process.stderr.write(`${command}: ${err.message}\n`);
    else throw err;
    return 1;
  }
}
