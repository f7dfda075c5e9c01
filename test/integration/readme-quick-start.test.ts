// The README's quick start, run as written: its shell commands between the quick-start markers
// (a receiver, then a curl add targeting it), against a fresh `fermata serve` on the defaults of
// `npm start` but port 0, until the receiver prints the delivery. The only edits are the ports:
// the service's 7070 becomes the port it was given and the receiver's 9000 a free one, so the
// test runs beside anything else on this machine. A README whose commands stop working fails here.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { test } from 'node:test';
import { defaults } from '../../cli/serve/settings.ts';
import { freePort, waitFor } from '../helpers/chromium.ts';
import { testScratch } from '../helpers/scratch.ts';
import { startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { toolOrSkip } from '../helpers/tools.ts';

const { children, tempDir } = testScratch('fermata-readme');
const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const servicePortInReadme = '7070';
const receiverPortInReadme = '9000';

/** The ```sh blocks between the quick-start markers, in order. */
function quickStartCommands(): string[] {
  const begin = readme.indexOf('<!-- quick-start:begin');
  const end = readme.indexOf('<!-- quick-start:end -->');
  assert.ok(begin !== -1 && end > begin, 'README.md marks its quick start');
  return [...readme.slice(begin, end).matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => (match[1] as string).trim());
}

/** Whether something accepts TCP connections on 127.0.0.1:`port` now. */
async function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

test('the README\'s quick start, as written: its receiver prints the delivery of its curl add', { timeout: 120_000 }, async (t) => {
  if (toolOrSkip(t, 'curl') === undefined) return;
  const commands = quickStartCommands();
  assert.equal(commands.length, 2, 'a receiver, then an add');
  const [receiverCommand, addCommand] = commands as [string, string];
  assert.equal(defaults.listen, `127.0.0.1:${servicePortInReadme}`, 'the README\'s service address is `npm start`\'s default');
  assert.ok(addCommand.includes(`http://127.0.0.1:${servicePortInReadme}/`) && addCommand.includes(`http://127.0.0.1:${receiverPortInReadme}/`), addCommand);
  assert.ok(receiverCommand.includes(`listen(${receiverPortInReadme},`), receiverCommand);

  const service = await startService(tempDir('data'), (child) => children.add(child));
  const receiverPort = await freePort();
  const withPorts = (command: string): string =>
    command.replaceAll(`127.0.0.1:${servicePortInReadme}`, `127.0.0.1:${service.port}`).replaceAll(`127.0.0.1:${receiverPortInReadme}`, `127.0.0.1:${receiverPort}`).replaceAll(`listen(${receiverPortInReadme},`, `listen(${receiverPort},`);

  // Its own process group, so the shell and the node it starts are stopped together.
  const receiver = spawn('sh', ['-c', withPorts(receiverCommand)], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(receiver);
  let printed = '';
  receiver.stdout.setEncoding('utf8').on('data', (chunk: string) => (printed += chunk));
  receiver.stderr.setEncoding('utf8').on('data', (chunk: string) => (printed += chunk));
  try {
    await waitFor('the receiver to listen', () => listening(receiverPort));
    const answer = await withTimeout(
      new Promise<string>((resolve, reject) => execFile('sh', ['-c', withPorts(addCommand)], { encoding: 'utf8' }, (err, stdout) => (err === null ? resolve(stdout) : reject(err)))),
      20_000,
      'the curl add',
    );
    const { id } = JSON.parse(answer) as { id: string };
    assert.match(id, /^[0-9a-z]{24}$/, answer);
    await waitFor('the receiver to print the delivery', () => printed.includes(id) && printed.includes('hello'), 30_000);
    assert.match(printed, new RegExp(`'fermata-timer-id': '${id}'`));
    assert.match(printed, /'fermata-attempt': '1'/);
    assert.match(printed, /'fermata-fire-at': '\d{13}'/);
    assert.match(printed, /hello/);
  } finally {
    if (receiver.exitCode === null) process.kill(-(receiver.pid as number), 'SIGKILL');
    service.child.kill('SIGTERM');
    await withTimeout(service.exited, 20_000, 'fermata to stop');
  }
});
