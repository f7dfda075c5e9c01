// Standard Webhooks signing: the spec's published test vector, secret rotation, binary bodies,
// config-time refusal of malformed secrets, the receiver's verdicts, and the reference
// TypeScript library verifying what we sign.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { test } from 'node:test';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { SigningSecretError, verifyWebhook, WebhookSigner } from '../../dispatch/signing.ts';
import { deliveryLimits } from '../../engine/limits.ts';
import { Prng } from '../helpers/prng.ts';

// The vector of the spec's reference libraries (libraries/javascript/src/webhook.test.ts,
// "sign function works"; the same values in the Python, Go and C# suites).
const vector = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  msgId: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestampSeconds: 1614265330,
  payload: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
} as const;

const utf8 = new TextEncoder();
const at = (seconds: number) => ({ toleranceS: 300, nowMs: seconds * 1000 });
const secretOf = (bytes: Uint8Array): string => `whsec_${Buffer.from(bytes).toString('base64')}`;

test('signs the Standard Webhooks test vector exactly, and verifies it', () => {
  const signer = new WebhookSigner([vector.secret]);
  const headers = signer.sign(vector.msgId, vector.timestampSeconds, utf8.encode(vector.payload));
  assert.deepEqual(headers, {
    'webhook-id': vector.msgId,
    'webhook-timestamp': String(vector.timestampSeconds),
    'webhook-signature': vector.signature,
  });
  assert.equal(verifyWebhook(vector.secret, headers, utf8.encode(vector.payload), at(vector.timestampSeconds)), 'valid');
  assert.equal(verifyWebhook(vector.secret, headers, utf8.encode(`${vector.payload} `), at(vector.timestampSeconds)), 'no_match', 'one byte more is another body');
});

test('rotation: every secret signs, in the configured order, and each entry verifies under its own secret', () => {
  const prng = new Prng(5);
  const secrets = [secretOf(prng.bytes(32)), secretOf(prng.bytes(24)), secretOf(prng.bytes(64))];
  const signer = new WebhookSigner(secrets);
  assert.equal(signer.secretCount, 3);
  const body = utf8.encode('{"timer":"rotation"}');
  const headers = signer.sign('0123456789abcdefghjkmnpq', 1_700_000_000, body);
  const entries = headers['webhook-signature'].split(' ');
  assert.equal(entries.length, 3, headers['webhook-signature']);
  entries.forEach((entry, i) => {
    const alone = { ...headers, 'webhook-signature': entry };
    secrets.forEach((secret, j) => assert.equal(verifyWebhook(secret, alone, body, at(1_700_000_000)), i === j ? 'valid' : 'no_match', `entry ${i} under secret ${j}`));
    assert.equal(entry, new WebhookSigner([secrets[i] as string]).sign('0123456789abcdefghjkmnpq', 1_700_000_000, body)['webhook-signature']);
  });
  for (const secret of secrets) assert.equal(verifyWebhook(secret, headers, body, at(1_700_000_000)), 'valid', 'the whole header verifies under any configured secret');
  assert.equal(verifyWebhook(secretOf(prng.bytes(32)), headers, body, at(1_700_000_000)), 'no_match', 'an unconfigured secret matches no entry');
});

test('a binary, non-UTF-8 body is signed byte for byte', () => {
  const key = new Prng(7).bytes(32);
  const body = new Uint8Array([0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0xed, 0xa0, 0x80, 0x0a, 0xf8]);
  assert.throws(() => new TextDecoder('utf-8', { fatal: true }).decode(body), TypeError, 'the body must not be valid UTF-8');
  const headers = new WebhookSigner([secretOf(key)]).sign('tmr_binary', 1_650_000_000, body);
  const independent = createHmac('sha256', key)
    .update(Buffer.concat([Buffer.from('tmr_binary.1650000000.', 'ascii'), body]))
    .digest('base64');
  assert.equal(headers['webhook-signature'], `v1,${independent}`);
  const viaString = createHmac('sha256', key).update(`tmr_binary.1650000000.${new TextDecoder().decode(body)}`).digest('base64');
  assert.notEqual(independent, viaString, 'signing a decoded string would differ');
  assert.equal(verifyWebhook(secretOf(key), headers, body, at(1_650_000_000)), 'valid');
  const flipped = body.slice();
  flipped[3] = 0x81;
  assert.equal(verifyWebhook(secretOf(key), headers, flipped, at(1_650_000_000)), 'no_match');
});

test('secrets are accepted with or without base64 padding, and only in whsec_ form', () => {
  const key = new Prng(11).bytes(32); // 32 bytes: base64 ends in one "="
  const padded = secretOf(key);
  assert.ok(padded.endsWith('='));
  const body = utf8.encode('x');
  const fromPadded = new WebhookSigner([padded]).sign('id', 1, body);
  assert.deepEqual(new WebhookSigner([padded.replace(/=+$/, '')]).sign('id', 1, body), fromPadded);
});

test('a malformed secret is refused at construction, named by its index, never quoted', () => {
  const good = secretOf(new Prng(13).bytes(24));
  const cases: Array<[string, string, RegExp]> = [
    ['no prefix', vector.secret.slice('whsec_'.length), /must start with "whsec_"/],
    ['another prefix', `whsk_${vector.secret.slice('whsec_'.length)}`, /must start with "whsec_"/],
    ['empty after the prefix', 'whsec_', /not base64/],
    ['not base64', 'whsec_MfKQ9r8GKYqrTwjU$D8ILPZIo2LaLaSw', /not base64/],
    ['base64url alphabet', `whsec_${Buffer.from(new Prng(17).bytes(30)).toString('base64url').replace(/^./, '-')}`, /not base64/],
    ['too short (16 bytes)', secretOf(new Prng(19).bytes(16)), /decodes to 16 bytes; a secret is 24 to 64/],
    ['too long (65 bytes)', secretOf(new Prng(23).bytes(65)), /decodes to 65 bytes/],
  ];
  for (const [what, bad, message] of cases) {
    let thrown: unknown;
    try {
      new WebhookSigner([good, bad, good]);
    } catch (err) {
      thrown = err;
    }
    assert.ok(thrown instanceof SigningSecretError, `${what}: ${String(thrown)}`);
    assert.equal(thrown.code, 'SIGNING_SECRET_INVALID');
    assert.equal(thrown.index, 1, what);
    assert.match(thrown.message, /^signing secret \[1\]: /, what);
    assert.match(thrown.message, message, what);
    const body = bad.slice('whsec_'.length);
    if (body.length >= 4) assert.ok(!thrown.message.includes(body), `${what}: the message must not quote the secret`);
    assert.throws(() => verifyWebhook(bad, {}, new Uint8Array(), at(0)), SigningSecretError, `${what}: verify refuses it too`);
  }
  const tooMany = Array.from({ length: deliveryLimits.signingSecretsMax + 1 }, () => good);
  assert.throws(() => new WebhookSigner(tooMany), (err: unknown) => err instanceof SigningSecretError && err.message.includes(`at most ${deliveryLimits.signingSecretsMax} sign at once`));
});

test('sign() asserts its inputs: an id with "." or spaces, a timestamp that is not whole seconds', () => {
  const signer = new WebhookSigner([vector.secret]);
  const body = new Uint8Array(1);
  for (const id of ['a.b', 'a b', '', 'é']) assert.throws(() => signer.sign(id, 1, body), assert.AssertionError, JSON.stringify(id));
  for (const seconds of [1.5, -1, Number.NaN, 2 ** 53]) assert.throws(() => signer.sign('id', seconds, body), assert.AssertionError, String(seconds));
  assert.throws(() => new WebhookSigner([]), assert.AssertionError);
});

test('the receiver: missing headers, bad or stale timestamps, other versions, cut signatures', () => {
  const body = utf8.encode(vector.payload);
  const good = new WebhookSigner([vector.secret]).sign(vector.msgId, vector.timestampSeconds, body);
  const verdict = (headers: Record<string, string | string[] | undefined>, nowSeconds: number = vector.timestampSeconds) =>
    verifyWebhook(vector.secret, { ...good, ...headers }, body, at(nowSeconds));

  assert.equal(verdict({ 'webhook-id': undefined }), 'missing_header');
  assert.equal(verdict({ 'webhook-timestamp': '' }), 'missing_header');
  assert.equal(verdict({ 'webhook-signature': [vector.signature, vector.signature] }), 'missing_header', 'a repeated header is not taken');
  assert.equal(verdict({ 'webhook-timestamp': 'hello' }), 'bad_timestamp');
  assert.equal(verdict({ 'webhook-timestamp': '1614265330.5' }), 'bad_timestamp');
  assert.equal(verdict({}, vector.timestampSeconds + 300), 'valid', 'exactly at the tolerance');
  assert.equal(verdict({}, vector.timestampSeconds + 301), 'too_old');
  assert.equal(verdict({}, vector.timestampSeconds - 300), 'valid');
  assert.equal(verdict({}, vector.timestampSeconds - 301), 'too_new');
  assert.equal(verdict({ 'webhook-timestamp': String(vector.timestampSeconds + 1) }), 'no_match', 'the timestamp is signed');
  assert.equal(verdict({ 'webhook-id': 'msg_other' }), 'no_match', 'the id is signed');
  assert.equal(verdict({ 'webhook-signature': vector.signature.replace('v1,', 'v2,') }), 'no_match', 'only v1 entries are HMAC');
  assert.equal(verdict({ 'webhook-signature': vector.signature.slice(0, 10) }), 'no_match');
  assert.equal(verdict({ 'webhook-signature': 'v1,' }), 'no_match');
  assert.equal(verdict({ 'webhook-signature': `v1a,AAAA v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= ${vector.signature}` }), 'valid', 'any matching entry will do');
});

// The spec's reference TypeScript library (standardwebhooks on npm, which no one here wrote) as
// an independent receiver, with its own clock. It verifies the body as text, so the body here is
// JSON with multi-byte UTF-8.
test('the reference library (standardwebhooks) verifies what we sign', () => {
  const prng = new Prng(29);
  const secrets = [secretOf(prng.bytes(24)), secretOf(prng.bytes(32))];
  const nowSeconds = Math.floor(Date.now() / 1000); // the library checks against its own clock, ±5 min
  const body = Buffer.from(utf8.encode('{"note": "Zoë – ✓ – 🎉", "n": 1}'));
  const headers = new WebhookSigner(secrets).sign('0123456789abcdefghjkmnpq', nowSeconds, body);
  secrets.forEach((secret, i) => assert.doesNotThrow(() => new Webhook(secret).verify(body, headers), `configured secret ${i}`));
  assert.throws(() => new Webhook(secretOf(prng.bytes(32))).verify(body, headers), WebhookVerificationError, 'a secret not configured');
  assert.throws(() => new Webhook(secrets[0] as string).verify(body, { ...headers, 'webhook-id': 'tampered' }), WebhookVerificationError, 'a tampered id');
});
