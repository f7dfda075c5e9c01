// verifyDelivery (@fermata/client) on deliveries signed as the service signs them
// (dispatch/signing.ts): valid under any of the receiver's secrets (a rotation), with headers as
// node:http, fetch's Headers or a plain object give them; refused with DeliveryVerificationError
// for another secret, one byte more of body, a timestamp past five minutes, a missing header.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DeliveryVerificationError, verifyDelivery } from '@fermata/client';
import { WebhookSigner } from '../../dispatch/signing.ts';

const oldSecret = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
const newSecret = `whsec_${Buffer.alloc(32, 2).toString('base64')}`;
const otherSecret = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;
const body = Buffer.from('{"order":1}');
const id = '0000000004000001m97hwpx5';

function delivery(secrets: string[], at = Math.floor(Date.now() / 1000)): Record<string, string> {
  return { ...new WebhookSigner(secrets).sign(id, at, body), 'fermata-timer-id': id, 'fermata-attempt': '2', 'fermata-fire-at': '1765051381837', 'idempotency-key': 'order-1' };
}

test('a signed delivery verifies under any configured secret, in any header form', () => {
  const headers = delivery([oldSecret, newSecret]);
  for (const secrets of [[oldSecret], [newSecret], [otherSecret, newSecret], oldSecret]) {
    const seen = verifyDelivery(headers, body, secrets);
    assert.deepEqual({ ...seen, signedAt: undefined }, { timerId: id, attempt: 2, fireAtMs: 1765051381837, idempotencyKey: 'order-1', signedAt: undefined });
  }
  assert.equal(verifyDelivery(new Headers(headers), new Uint8Array(body), [newSecret]).timerId, id);
  assert.equal(verifyDelivery({ ...headers, 'webhook-id': [headers['webhook-id'] as string] }, body.toString(), [newSecret]).attempt, 2);
});

test('anything else is a DeliveryVerificationError', () => {
  const headers = delivery([oldSecret]);
  const refused = (run: () => unknown): void => assert.throws(run, (err: unknown) => err instanceof DeliveryVerificationError && err.code === 'DELIVERY_UNVERIFIED');
  refused(() => verifyDelivery(headers, body, [otherSecret]));
  refused(() => verifyDelivery(headers, Buffer.concat([body, Buffer.from(' ')]), [oldSecret]));
  refused(() => verifyDelivery(delivery([oldSecret], Math.floor(Date.now() / 1000) - 3600), body, [oldSecret]));
  const { 'webhook-signature': _, ...unsigned } = headers;
  refused(() => verifyDelivery(unsigned, body, [oldSecret]));
});
