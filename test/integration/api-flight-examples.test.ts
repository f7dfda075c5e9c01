// docs/api.md's Arrow Flight examples, run as written with pyarrow: the DoPut example, and the
// pull delivery example (its curl commands, then its DoGet and DoAction "ack"), against a fresh
// `fermata serve --flight`. The only edits are the ports: the docs' 7070 and 7071 become the
// ones the service was given. An example that stops working fails here.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { pyarrowFlightPython, run } from '../helpers/python-venv.ts';
import { testScratch } from '../helpers/scratch.ts';
import { flightUrl, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { skipOrFail, toolOrSkip } from '../helpers/tools.ts';

const { children, tempDir } = testScratch('fermata-api-examples');
const apiDoc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
const installTimeoutMs = 10 * 60_000;
const scriptTimeoutMs = 60_000;

/** The fenced blocks (```LANG) that follow `marker` in docs/api.md, up to the next heading or marker. */
function examplesAfter(marker: string): { lang: string; code: string }[] {
  const start = apiDoc.indexOf(`<!-- ${marker}`);
  assert.ok(start !== -1, `docs/api.md marks ${marker}`);
  const rest = apiDoc.slice(start + 4);
  const stop = rest.search(/\n(?:#|<!-- )/);
  return [...(stop === -1 ? rest : rest.slice(0, stop)).matchAll(/```(\w+)\n([\s\S]*?)```/g)].map((match) => ({ lang: match[1] as string, code: match[2] as string }));
}

test('docs/api.md\'s pyarrow Flight examples, as written: DoPut, and pull delivery by DoGet and DoAction', { timeout: installTimeoutMs + 3 * 60_000 }, async (t) => {
  if (toolOrSkip(t, 'curl') === undefined) return;
  const venv = await pyarrowFlightPython(installTimeoutMs);
  if ('skip' in venv) return skipOrFail(t, venv.skip);
  const service = await startService(tempDir('data'), (child) => children.add(child), { args: ['--flight', '127.0.0.1:0'] });
  try {
    const flight = new URL((await flightUrl(service)).replace('grpc+tcp:', 'http:'));
    const withPorts = (code: string): string => code.replaceAll('127.0.0.1:7071', `127.0.0.1:${flight.port}`).replaceAll('127.0.0.1:7070', `127.0.0.1:${service.port}`);

    const [put, ...putRest] = examplesAfter('flight-example:put');
    assert.ok(put !== undefined && put.lang === 'python' && putRest.length === 0, 'one python example for DoPut');
    const added = await run(venv.python, ['-c', withPorts(put.code)], scriptTimeoutMs, 'the DoPut example');
    assert.equal(added.code, 0, added.stderr);
    assert.match(added.stdout, /^\{'accepted': 2, 'duplicates': 0, 'first_id': '[0-9a-z]{24}'\}\n$/);

    const [queue, pull, ...pullRest] = examplesAfter('flight-example:pull');
    assert.ok(queue?.lang === 'sh' && pull?.lang === 'python' && pullRest.length === 0, 'the curl commands, then the python consumer');
    const setUp = await run('sh', ['-c', withPorts(queue.code)], scriptTimeoutMs, 'the pull example\'s curl commands');
    assert.equal(setUp.code, 0, setUp.stderr);
    const id = [...setUp.stdout.matchAll(/"id":"([0-9a-z]{24})"/g)].at(-1)?.[1];
    assert.ok(id !== undefined, `the add answered an id: ${setUp.stdout}`);
    const consumed = await run(venv.python, ['-c', withPorts(pull.code)], scriptTimeoutMs, 'the pull example');
    assert.equal(consumed.code, 0, consumed.stderr);
    assert.ok(consumed.stdout.startsWith(`${id} 1 b'work'\n`), consumed.stdout);
    assert.match(consumed.stdout, /"delivered":1/);
    const after = (await (await fetch(`${service.url}/v1/timers/${id}`)).json()) as { state: string };
    assert.equal(after.state, 'delivered', 'the ack settled the lease durably');
  } finally {
    service.child.kill('SIGTERM');
    await withTimeout(service.exited, 20_000, 'fermata to stop');
  }
});
