// The Python recipes in examples/python, run as a user runs them against one real `fermata serve`
// (with --flight, and two signing secrets): receiver.py listens, and add_arrow_http.py (a demo
// table, and a Parquet file), add_flight.py and add_dataframe.py each add timers due now
// targeting it; every delivery must reach the receiver verified, with its row's payload. A table
// larger than a batch is cut at GET /v1/limits; a refused batch is reported by its rows. The
// receiver knows only the second of the service's secrets (plus one the service never had), as
// during a rotation. A delivery tampered with on its way (a proxy here alters the body) is
// refused with 401, which fermata records, while the same delivery untampered passes;
// receiver.verify() is then held to the timestamp tolerance, the v1 prefix and the secret forms
// on that real delivery's headers. The venv (pyarrow, pandas, requests) is its own, cached; a
// missing package skips (fails under CI).
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ensureVenv, run } from '../helpers/python-venv.ts';
import { until } from '../helpers/recipes-wait.ts';
import { testScratch } from '../helpers/scratch.ts';
import { flightUrl, type Service, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { skipOrFail } from '../helpers/tools.ts';

const { children, tempDir } = testScratch('fermata-recipes');
const recipesDir = fileURLToPath(new URL('../../examples/python/', import.meta.url));
/** A venv of its own (git-ignored, kept between runs): the pyarrow tests' lacks pandas and requests. */
const venvDir = fileURLToPath(new URL('../../node_modules/.cache/fermata-pyvenv-recipes', import.meta.url));
const installTimeoutMs = 10 * 60_000;
const scriptTimeoutMs = 60_000;
const deliveryWaitMs = 30_000;

const newSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;
const [retiringSecret, currentSecret, receiverOnlySecret] = [newSecret(), newSecret(), newSecret()];

/** The receiver's own output, and what it printed for each webhook-id it accepted. */
let receiverOutput = '';
const delivered = (id: string): string | undefined => new RegExp(`^delivered ${id} attempt \\d+: (.*)$`, 'm').exec(receiverOutput)?.[1];

async function stopped(child: ChildProcess, exited: Promise<unknown>): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  await withTimeout(exited, 20_000, 'a child to stop');
}

describe('the Python recipes in examples/python, against a real fermata serve', { timeout: installTimeoutMs + 5 * 60_000 }, () => {
  let python: string | undefined;
  let skipReason = '';
  /** Why add_flight.py cannot run here (a pyarrow build without Flight), or undefined. */
  let flightSkip: string | undefined;
  let service: Service;
  let flight: string;
  let receiver: ChildProcess;
  let receiverExited: Promise<unknown>;
  let receiverUrl: string;

  before(async () => {
    const venv = await ensureVenv(['pyarrow', 'pandas', 'requests'], { dir: venvDir, installTimeoutMs });
    if ('skip' in venv) {
      skipReason = `the Python recipes not run: ${venv.skip}`;
      return;
    }
    python = venv.python;
    const probe = await run(python, ['-c', 'import pyarrow.flight'], scriptTimeoutMs, 'import pyarrow.flight');
    if (probe.code !== 0) flightSkip = `add_flight.py not run: this pyarrow build has no Flight module: ${probe.stderr.trim().split('\n').at(-1) ?? ''}`;
    service = await startService(tempDir('data'), (child) => children.add(child), {
      args: ['--flight', '127.0.0.1:0'],
      env: { FERMATA_SIGNING_SECRETS: `${retiringSecret},${currentSecret}` },
    });
    flight = await flightUrl(service);
    receiver = spawn(python, [join(recipesDir, 'receiver.py'), '--port', '0'], { env: { ...process.env, WEBHOOK_SECRETS: `${receiverOnlySecret} ${currentSecret}` }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(receiver);
    receiverExited = new Promise((resolve) => receiver.once('exit', resolve));
    receiver.stdout?.setEncoding('utf8').on('data', (chunk: string) => (receiverOutput += chunk));
    receiver.stderr?.setEncoding('utf8').on('data', (chunk: string) => (receiverOutput += chunk));
    await until('receiver.py to listen', () => /^listening on http:\/\/\S+$/m.test(receiverOutput), 20_000, () => receiverOutput);
    receiverUrl = (/^listening on (http:\/\/\S+)$/m.exec(receiverOutput) as RegExpExecArray)[1] as string;
  });

  after(async () => {
    if (python === undefined) return;
    await stopped(receiver, receiverExited);
    await stopped(service.child, service.exited);
  });

  async function recipe(script: string, args: readonly string[]): Promise<string> {
    const result = await run(python as string, [join(recipesDir, script), ...args], scriptTimeoutMs, script);
    assert.equal(result.code, 0, `${script} exited ${result.code}:\n${result.stderr}`);
    return result.stdout;
  }

  async function assertDelivered(ids: readonly string[], payloads: readonly string[]): Promise<void> {
    const timers = async (): Promise<string> => (await Promise.all(ids.map(async (id) => (await fetch(`${service.url}/v1/timers/${id}`)).text()))).join('\n');
    await until(`receiver.py to verify ${ids.join(', ')}`, () => ids.every((id) => delivered(id) !== undefined), deliveryWaitMs, async () => `the timers: ${await timers()}\nthe receiver printed:\n${receiverOutput}`);
    assert.deepEqual(ids.map(delivered), payloads, 'each row\'s payload reached the receiver with its own id');
  }

  test('add_arrow_http.py adds a pyarrow table as one Arrow stream; a rerun adds nothing and answers the same ids', async (t) => {
    if (python === undefined) return skipOrFail(t, skipReason);
    const args = ['--url', service.url, '--target', `${receiverUrl}/arrow`, '--count', '3', '--in-seconds', '0'];
    const ids = (await recipe('add_arrow_http.py', args)).trim().split('\n');
    assert.equal(ids.length, 3);
    for (const id of ids) assert.match(id, /^[0-9a-z]{24}$/);
    await assertDelivered(ids, ['{"order": 0}', '{"order": 1}', '{"order": 2}']);
    assert.deepEqual((await recipe('add_arrow_http.py', args)).trim().split('\n'), ids, 'the keys made the resend harmless');
  });

  test('add_arrow_http.py cuts a table larger than a batch at the limits GET /v1/limits reports, every id in its row\'s place', async (t) => {
    if (python === undefined) return skipOrFail(t, skipReason);
    const limits = (await (await fetch(`${service.url}/v1/limits`)).json()) as { batch_rows_max: number };
    const count = limits.batch_rows_max + 20_000;
    const ids = (await recipe('add_arrow_http.py', ['--url', service.url, '--target', `${receiverUrl}/large`, '--count', String(count), '--in-seconds', '86400'])).trim().split('\n');
    assert.equal(new Set(ids).size, count, 'one id a row, none repeated');
    const last = (await (await fetch(`${service.url}/v1/timers/${ids.at(-1)}`)).json()) as { key: string };
    assert.equal(last.key, `demo-${count - 1}`, 'the last row\'s id names the last row\'s timer');
  });

  test('add_arrow_http.py --parquet streams a Parquet file a batch at a time, and names the rows a refused batch held', async (t) => {
    if (python === undefined) return skipOrFail(t, skipReason);
    const dir = tempDir('parquet');
    const write = `
import sys, time
import pyarrow as pa, pyarrow.parquet as pq
now_ms = int(time.time() * 1000)
def timers(target, n):
    return pa.table({
        "fire_at": pa.array([now_ms] * n, type=pa.timestamp("ms", tz="UTC")),
        "target": [target] * n,
        "payload": [f"row {i}" for i in range(n)],
        "key": [f"parquet-{target}-{i}" for i in range(n)],
    })
pq.write_table(timers(sys.argv[1], 4), sys.argv[3] + "/good.parquet", row_group_size=2)
pq.write_table(timers(sys.argv[2], 2), sys.argv[3] + "/bad.parquet")
`;
    const written = await run(python, ['-c', write, `${receiverUrl}/parquet`, 'ftp://127.0.0.1/nowhere', dir], scriptTimeoutMs, 'writing the Parquet files');
    assert.equal(written.code, 0, written.stderr);
    const ids = (await recipe('add_arrow_http.py', ['--url', service.url, '--parquet', join(dir, 'good.parquet')])).trim().split('\n');
    assert.equal(ids.length, 4);
    await assertDelivered(ids, ['row 0', 'row 1', 'row 2', 'row 3']);

    const refused = await run(python, [join(recipesDir, 'add_arrow_http.py'), '--url', service.url, '--parquet', join(dir, 'bad.parquet')], scriptTimeoutMs, 'add_arrow_http.py --parquet bad.parquet');
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^refused: rows 0 to 1: 400 BATCH_INVALID: .*target/m);
  });

  test('add_flight.py adds the table by DoPut and reads back every row\'s id', async (t) => {
    if (python === undefined) return skipOrFail(t, skipReason);
    if (flightSkip !== undefined) return skipOrFail(t, flightSkip);
    const ids = (await recipe('add_flight.py', ['--flight', flight, '--target', `${receiverUrl}/flight`, '--count', '3', '--in-seconds', '0'])).trim().split('\n');
    assert.equal(ids.length, 3);
    await assertDelivered(ids, ['{"invoice": 0}', '{"invoice": 1}', '{"invoice": 2}']);
  });

  test('add_dataframe.py adds a pandas DataFrame, one timer a row, its ids beside the rows', async (t) => {
    if (python === undefined) return skipOrFail(t, skipReason);
    const printed = await recipe('add_dataframe.py', ['--url', service.url, '--target', `${receiverUrl}/dataframe`, '--in-seconds', '0']);
    const rows = [...printed.matchAll(/^\s*(\w+)\s+([0-9a-z]{24})$/gm)].map((match) => ({ customer: match[1] as string, id: match[2] as string }));
    assert.deepEqual(rows.map((row) => row.customer), ['ada', 'grace', 'edsger'], printed);
    await assertDelivered(rows.map((row) => row.id), ['{"remind": "ada", "plan": "pro"}', '{"remind": "grace", "plan": "team"}', '{"remind": "edsger", "plan": "pro"}']);
  });

  test('receiver.py refuses a real delivery whose body was changed on the way, and verify() holds to the spec on its headers', async (t) => {
    if (python === undefined) return skipOrFail(t, skipReason);
    // A proxy between fermata and the receiver that keeps what fermata sent and forwards it tampered.
    let original: { headers: IncomingHttpHeaders; body: string } | undefined;
    const proxy: Server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        original ??= { headers: req.headers, body };
        void fetch(`${receiverUrl}/tampered`, { method: 'POST', headers: webhookHeaders(req.headers), body: body.replace('10 EUR', '1000 EUR') }).then(
          (answer) => res.writeHead(answer.status).end(),
          () => res.writeHead(502).end(),
        );
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const added = await fetch(`${service.url}/v1/timers`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ delay_ms: 0, target: `http://127.0.0.1:${(proxy.address() as { port: number }).port}/pay`, payload: 'pay me 10 EUR' }),
      });
      const { id } = (await added.json()) as { id: string };
      await until('fermata to record the receiver\'s 401', async () => {
        const timer = (await (await fetch(`${service.url}/v1/timers/${id}`)).json()) as { last_status: number | null };
        return timer.last_status === 401;
      }, deliveryWaitMs, () => receiverOutput);
      assert.match(receiverOutput, /^refused: no v1 signature matches a secret$/m);
      assert.equal(delivered(id), undefined, 'the tampered body was not taken');
      await fetch(`${service.url}/v1/timers/${id}`, { method: 'DELETE' }); // no more retries through the proxy

      const sent = original as { headers: IncomingHttpHeaders; body: string };
      assert.equal(sent.headers['webhook-id'], id);
      assert.match(String(sent.headers['webhook-signature']), /^v1,\S{44} v1,\S{44}$/, 'one entry per service secret');
      const untampered = await fetch(`${receiverUrl}/replayed`, { method: 'POST', headers: webhookHeaders(sent.headers), body: sent.body });
      assert.equal(untampered.status, 204);
      await until('receiver.py to print the untampered delivery', () => delivered(id) !== undefined, 10_000, () => receiverOutput);
      assert.equal(delivered(id), 'pay me 10 EUR');

      const verdicts = await verifyCases(python, webhookHeaders(sent.headers), sent.body);
      assert.deepEqual(verdicts, {
        asSent: id,
        secretWithoutPadding: id,
        almostTooOld: id,
        tooOld: 'webhook-timestamp is 301 s old, more than 300 s',
        tooNew: 'webhook-timestamp is 301 s ahead, more than 300 s',
        noSignature: 'missing webhook-id, webhook-timestamp or webhook-signature',
        otherVersion: 'no v1 signature matches a secret',
        unknownSecret: 'no v1 signature matches a secret',
        notASecret: 'a signing secret is whsec_ followed by base64',
      });
    } finally {
      proxy.closeAllConnections(); // fermata keeps its connection to a target open
      await new Promise((resolve) => proxy.close(resolve));
    }
  });
});

/** The headers a receiver checks, as one string each. */
function webhookHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const names = ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'fermata-attempt', 'content-type'];
  return Object.fromEntries(names.filter((name) => typeof headers[name] === 'string').map((name) => [name, headers[name] as string]));
}

/** receiver.verify() on a real delivery's headers and body, varied one way at a time: each case's id or refusal. */
async function verifyCases(python: string, headers: Record<string, string>, body: string): Promise<Record<string, string>> {
  const script = `
import json, sys
import receiver
headers, body, current, unknown = json.loads(sys.argv[1])
sent = int(headers["webhook-timestamp"])
def verdict(headers=headers, secrets=(current,), now=sent):
    try:
        return receiver.verify([receiver.secret_key(s) for s in secrets], headers, body.encode(), now)
    except (receiver.VerificationError, ValueError) as err:
        return str(err)
print(json.dumps({
    "asSent": verdict(),
    "secretWithoutPadding": verdict(secrets=(current.rstrip("="),)),
    "almostTooOld": verdict(now=sent + 300),
    "tooOld": verdict(now=sent + 301),
    "tooNew": verdict(now=sent - 301),
    "noSignature": verdict(headers={k: v for k, v in headers.items() if k != "webhook-signature"}),
    "otherVersion": verdict(headers={**headers, "webhook-signature": headers["webhook-signature"].replace("v1,", "v2,")}),
    "unknownSecret": verdict(secrets=(unknown,)),
    "notASecret": verdict(secrets=("whsec_not base64!",)),
}))
`;
  const result = await run(python, ['-c', script, JSON.stringify([headers, body, currentSecret, receiverOnlySecret])], scriptTimeoutMs, 'receiver.verify() cases', { ...process.env, PYTHONPATH: recipesDir });
  assert.equal(result.code, 0, result.stderr);
  return JSON.parse(result.stdout) as Record<string, string>;
}
