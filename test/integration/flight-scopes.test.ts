// Scoped tokens on the Arrow Flight port (issue 47), with pyarrow.flight
// (test/fixtures/pyarrow_flight_scopes.py; skipped, saying why, without python3 or an index to
// install pyarrow from): DoPut needs write, DoGet (a pull lease) write, the descriptions read; a
// token without the scope is PERMISSION_DENIED naming it (pyarrow: FlightUnauthorizedError), a
// queue-limited token is refused another queue by descriptor, by queue column and by ticket, and
// a call without a token is UNAUTHENTICATED. One service; every wait bounded.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { pyarrowFlightPython, run } from '../helpers/python-venv.ts';
import { testScratch } from '../helpers/scratch.ts';
import { flightUrl, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { skipOrFail } from '../helpers/tools.ts';

const script = fileURLToPath(new URL('../fixtures/pyarrow_flight_scopes.py', import.meta.url));
const scratch = testScratch('fermata-flight-scopes');
const installTimeoutMs = 10 * 60_000;
const tokens = { admin: 'flight-admin-token-000000', reader: 'flight-reader-token-00000', writer: 'flight-writer-token-00000', payments: 'flight-payments-token-000' };

type Outcome = { raised: string | null; message?: string; value?: unknown };

async function put(base: string, path: string, body: unknown): Promise<number> {
  const response = await fetch(`${base}${path}`, { method: 'PUT', headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens.admin}` }, body: JSON.stringify(body), signal: AbortSignal.timeout(10_000) });
  return response.status;
}

test('Flight: each call\'s scope, PERMISSION_DENIED naming the scope or the queue, UNAUTHENTICATED without a token', { timeout: installTimeoutMs + 2 * 60_000 }, async (t) => {
  const venv = await pyarrowFlightPython(installTimeoutMs);
  if ('skip' in venv) return skipOrFail(t, venv.skip);
  const dir = scratch.tempDir('data');
  const config = join(dir, 'fermata.json');
  writeFileSync(
    config,
    JSON.stringify({
      tokens: [
        tokens.admin,
        { name: 'reader', token: tokens.reader, scopes: ['read'] },
        { name: 'writer', token: tokens.writer, scopes: ['write'] },
        { name: 'payments', token: tokens.payments, scopes: ['read', 'write'], queues: ['payments'] },
      ],
    }),
  );
  const service = await startService(join(dir, 'data'), (child) => scratch.children.add(child), { args: ['--flight', '127.0.0.1:0', '--config', config] });
  try {
    assert.equal(await put(service.url, '/v1/queues/pulled', { delivery: 'pull' }), 200);
    assert.equal(await put(service.url, '/v1/queues/payments', {}), 200);
    const ran = await run(venv.python, [script, await flightUrl(service), tokens.reader, tokens.writer, tokens.payments], 2 * 60_000, 'pyarrow_flight_scopes.py');
    assert.equal(ran.code, 0, ran.stderr);
    const summary = JSON.parse(ran.stdout.trim().split('\n').at(-1) ?? '') as Record<string, Outcome>;
    const allowed = (name: string): void => assert.equal(summary[name]?.raised, null, `${name}: ${JSON.stringify(summary[name])}`);
    const denied = (name: string, pattern: RegExp): void => {
      const outcome = summary[name];
      assert.equal(outcome?.raised, 'FlightUnauthorizedError', `${name}: ${JSON.stringify(outcome)}`);
      assert.match(outcome.message ?? '', pattern, name);
    };
    allowed('reader_lists');
    denied('reader_puts', /FORBIDDEN: .*"write" scope; token "reader"/);
    denied('reader_pulls', /"write" scope/);
    denied('writer_lists', /"read" scope; token "writer"/);
    allowed('writer_puts');
    allowed('writer_pulls');
    allowed('payments_puts_its_queue');
    denied('payments_puts_other_descriptor', /token "payments" may not act on queue "default"/);
    denied('payments_puts_other_column', /may not act on queue "default"/);
    denied('payments_pulls_other', /may not act on queue "pulled"/);
    assert.equal(summary.no_token?.raised, 'FlightUnauthenticatedError', JSON.stringify(summary.no_token));
  } finally {
    service.child.kill('SIGTERM');
    await withTimeout(service.exited, 30_000, 'the service to stop');
  }
});
