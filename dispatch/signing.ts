// Standard Webhooks signing (standard-webhooks spec, "Signature scheme" and "Webhook headers"):
//
//   webhook-id         the message id (the timer's id: the same on every attempt)
//   webhook-timestamp  the attempt's time, integer seconds since the epoch
//   webhook-signature  "v1,<base64 HMAC-SHA256(key, `${id}.${timestamp}.` ‖ body)>", one entry
//                      per configured secret, space-separated, so a receiver can rotate secrets
//                      without downtime (it accepts the delivery if any entry verifies)
//
// Secrets are configured in the spec's form, "whsec_" + base64 of 24 to 64 random bytes; a
// malformed one is refused when the signer is built (config time), naming its index in the
// list and never its text. The body is signed as raw bytes, never as a string, so binary
// payloads sign byte for byte. Pure: a dispatch worker thread builds one signer per secret
// list and calls sign() per delivery; verifyWebhook() is the receiver's side, for tests and
// test sinks.
import assert from 'node:assert/strict';
import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';
import { deliveryLimits } from '../engine/limits.ts';

export const signingSecretPrefix = 'whsec_';
/** The spec's bounds on a symmetric secret: at least 192 bits, at most 512. */
export const signingSecretBytesMin = 24;
export const signingSecretBytesMax = 64;
const signatureVersion = 'v1';
const hmacSha256Bytes = 32;

/** The three Standard Webhooks headers of one delivery attempt, by their header names. */
export type WebhookHeaders = {
  readonly 'webhook-id': string;
  readonly 'webhook-timestamp': string;
  readonly 'webhook-signature': string;
};

/**
 * A configured signing secret that is not in the spec's form. `index` is its place in the
 * configured list (0-based); the message names it by that index and never quotes the secret.
 */
export class SigningSecretError extends Error {
  readonly code = 'SIGNING_SECRET_INVALID';
  readonly index: number;

  constructor(index: number, problem: string) {
    super(`signing secret [${index}]: ${problem}`);
    this.name = 'SigningSecretError';
    this.index = index;
  }
}

// Base64 with its padding optional, as secrets are written both ways.
const base64Text = /^[A-Za-z0-9+/]+={0,2}$/;

function secretKey(secret: string, index: number): KeyObject {
  if (!secret.startsWith(signingSecretPrefix)) throw new SigningSecretError(index, `must start with "${signingSecretPrefix}" followed by base64`);
  const text = secret.slice(signingSecretPrefix.length);
  const bytes = Buffer.from(text, 'base64');
  // Buffer.from skips characters it cannot decode, so a typo would silently change the key:
  // the text must be exactly the base64 of the bytes it decodes to.
  if (!base64Text.test(text) || bytes.toString('base64').replace(/=+$/, '') !== text.replace(/=+$/, '')) {
    throw new SigningSecretError(index, `the text after "${signingSecretPrefix}" is not base64`);
  }
  if (bytes.length < signingSecretBytesMin || bytes.length > signingSecretBytesMax) {
    throw new SigningSecretError(index, `decodes to ${bytes.length} bytes; a secret is ${signingSecretBytesMin} to ${signingSecretBytesMax} random bytes`);
  }
  return createSecretKey(bytes);
}

// The id is part of the signed text and a header value: visible ASCII without "." (the
// spec's separator) or spaces. fermata's ids are base32, so anything else is a bug.
const messageIdText = /^[\x21-\x2d\x2f-\x7e]+$/;

export class WebhookSigner {
  readonly #keys: readonly KeyObject[];

  /** Throws SigningSecretError for the first malformed secret, or when there are too many. */
  constructor(secrets: readonly string[]) {
    assert.ok(secrets.length > 0, 'a webhook signer needs at least one secret (build none when signing is off)');
    if (secrets.length > deliveryLimits.signingSecretsMax) {
      throw new SigningSecretError(deliveryLimits.signingSecretsMax, `${secrets.length} secrets configured; at most ${deliveryLimits.signingSecretsMax} sign at once`);
    }
    this.#keys = secrets.map(secretKey);
  }

  get secretCount(): number {
    return this.#keys.length;
  }

  /** The headers for one attempt at delivering `body` (raw bytes, signed as they are). */
  sign(msgId: string, timestampSeconds: number, body: Uint8Array): WebhookHeaders {
    assert.ok(messageIdText.test(msgId), `webhook id ${JSON.stringify(msgId)} must be visible ASCII without "." or spaces`);
    assert.ok(Number.isSafeInteger(timestampSeconds) && timestampSeconds >= 0, `webhook timestamp ${timestampSeconds} must be whole seconds since the epoch`);
    const timestamp = String(timestampSeconds);
    const signedPrefix = `${msgId}.${timestamp}.`;
    let signature = '';
    for (const key of this.#keys) {
      const entry = `${signatureVersion},${createHmac('sha256', key).update(signedPrefix, 'latin1').update(body).digest('base64')}`;
      signature = signature === '' ? entry : `${signature} ${entry}`;
    }
    return { 'webhook-id': msgId, 'webhook-timestamp': timestamp, 'webhook-signature': signature };
  }
}

/** What a receiver makes of a delivery's Standard Webhooks headers. */
export type WebhookVerdict = 'valid' | 'missing_header' | 'bad_timestamp' | 'too_old' | 'too_new' | 'no_match';

/** Request headers as node:http and node:http2 give them (a repeated header is an array). */
export type ReceivedHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

export interface VerifyOptions {
  /** How far the timestamp may be from now, either way, in seconds (the spec's libraries use 300). */
  readonly toleranceS: number;
  readonly nowMs: number;
}

const single = (value: string | readonly string[] | undefined): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

/**
 * Checks a delivery as a Standard Webhooks receiver does: the timestamp within tolerance and at
 * least one v1 entry of the signature header equal (in constant time) to the HMAC under
 * `secret`. Throws SigningSecretError if `secret` itself is malformed.
 */
export function verifyWebhook(secret: string, headers: ReceivedHeaders, body: Uint8Array, options: VerifyOptions): WebhookVerdict {
  const key = secretKey(secret, 0);
  const id = single(headers['webhook-id']);
  const timestamp = single(headers['webhook-timestamp']);
  const signature = single(headers['webhook-signature']);
  if (id === undefined || timestamp === undefined || signature === undefined) return 'missing_header';
  if (!/^\d{1,15}$/.test(timestamp)) return 'bad_timestamp';
  const sentMs = Number(timestamp) * 1000;
  if (sentMs < options.nowMs - options.toleranceS * 1000) return 'too_old';
  if (sentMs > options.nowMs + options.toleranceS * 1000) return 'too_new';
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.`, 'utf8').update(body).digest();
  for (const entry of signature.split(' ')) {
    const comma = entry.indexOf(',');
    if (comma < 0 || entry.slice(0, comma) !== signatureVersion) continue;
    const given = Buffer.from(entry.slice(comma + 1), 'base64');
    if (given.length === hmacSha256Bytes && timingSafeEqual(given, expected)) return 'valid';
  }
  return 'no_match';
}
