// Why a delivery attempt failed, in the words last_error shows and the kind /metrics counts
// (dispatch/failure-description.ts), from real errors where a loopback socket makes them (a
// refused connection, a TLS handshake with an untrusted certificate) and from the errors the
// origin clients and the target guard throw; and the dead-timer warn line's rate limit
// (dispatch/dead-letter-log.ts).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import tls from 'node:tls';
import type { Logger } from 'pino';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import { deliveryLimits } from '../../engine/limits.ts';
import { DeadLetterLog } from '../../dispatch/dead-letter-log.ts';
import { describeFailure, failureKind } from '../../dispatch/failure-description.ts';
import { DeliveryFailure } from '../../dispatch/origin-clients.ts';
import { testScratch } from '../helpers/scratch.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const scratch = testScratch('fermata-failure-description');

test('a refused connection, a timeout, a TLS failure, the SSRF guard and anything else', async () => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  const refused = await fetch(`http://127.0.0.1:${port}/`).then(
    () => assert.fail('nothing listens there'),
    (err: unknown) => err,
  );
  assert.deepEqual(describeFailure(refused, 10_000), { kind: failureKind.connect, text: 'connection refused' });
  assert.deepEqual(describeFailure(new DeliveryFailure('ECONNREFUSED', 'connecting to 127.0.0.1:9 failed: connect ECONNREFUSED'), 10_000), {
    kind: failureKind.connect,
    text: 'connection refused',
  });
  assert.deepEqual(describeFailure(new DeliveryFailure('ETIMEDOUT', 'no answer from http://a.example within 2500 ms'), 2500), { kind: failureKind.timeout, text: 'timeout after 2500 ms' });
  const expired = Object.assign(new Error('certificate has expired'), { code: 'CERT_HAS_EXPIRED' });
  assert.deepEqual(describeFailure(new DeliveryFailure('CERT_HAS_EXPIRED', 'connecting to a.example:443 failed: certificate has expired', expired), 10_000), {
    kind: failureKind.tls,
    text: 'TLS: certificate has expired',
  });
  const guard = new FermataError(errorCodes.targetRefused, 'http://db.internal/ resolves to 10.0.0.7, a private address', {});
  assert.deepEqual(describeFailure(new TypeError('fetch failed', { cause: guard }), 10_000), {
    kind: failureKind.guard,
    text: 'refused by the SSRF guard: http://db.internal/ resolves to 10.0.0.7, a private address',
  });
  assert.deepEqual(describeFailure(new Error('x'.repeat(10_000)), 10_000).kind, failureKind.other);
  assert.ok(new TextEncoder().encode(describeFailure(new Error('x'.repeat(10_000)), 10_000).text).length <= deliveryLimits.lastErrorBytesMax, 'bounded');
});

test('a TLS handshake with a certificate nobody vouches for reads "TLS: …"', { skip: skipUnlessTool('openssl') }, async () => {
  const dir = scratch.tempDir('tls');
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert], {
    stdio: 'ignore',
  });
  const server = tls.createServer({ cert: readFileSync(cert), key: readFileSync(key) }, (socket) => socket.end());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  try {
    const failed = await new Promise<unknown>((resolve) => {
      const socket = tls.connect({ host: '127.0.0.1', port });
      socket.once('secureConnect', () => resolve(undefined));
      socket.once('error', resolve);
    });
    const description = describeFailure(new DeliveryFailure((failed as { code: string }).code, 'connecting to 127.0.0.1 failed', failed), 10_000);
    assert.equal(description.kind, failureKind.tls);
    assert.match(description.text, /^TLS: self-signed certificate/);
  } finally {
    server.close();
  }
});

test('the dead-timer log writes at most its lines a second, then one summary of those it left out', () => {
  const lines: Array<{ fields: Record<string, unknown>; msg: string }> = [];
  const logger = { warn: (fields: Record<string, unknown>, msg: string) => lines.push({ fields, msg }) } as unknown as Logger;
  let now = 0;
  const log = new DeadLetterLog(logger, 3, () => now);
  const die = (n: number): void => {
    if (log.hasRoom()) log.dead({ id: `t${n}`, origin: 'https://down.example', attempts: 5, reason: 'attempts_exhausted', lastError: 'HTTP 503' });
  };
  for (let n = 0; n < 100; n++) die(n);
  assert.equal(lines.length, 3, 'a flood is cut at the limit');
  assert.deepEqual(lines[0]?.fields, { id: 't0', target: 'https://down.example', attempts: 5, reason: 'attempts_exhausted', last_error: 'HTTP 503' });
  now = 1000;
  die(100);
  assert.equal(lines.length, 5, 'the next second: the summary, then the line');
  assert.deepEqual(lines[3]?.fields, { not_logged: 97 });
  assert.equal(lines[4]?.fields.id, 't100');
  log.close();
  assert.equal(lines.length, 5, 'nothing left out, nothing more to say');
});
