// Checks that a request a receiver got is a delivery fermata signed (Standard Webhooks, with the
// standardwebhooks package): its `webhook-signature` matches the body under one of the receiver's
// secrets and its `webhook-timestamp` is within five minutes of the receiver's clock. Give it the
// body's exact bytes, as they came (not a parsed and re-serialized JSON). Several secrets verify a
// rotation: the old and the new one both pass while the service signs with both.
import { Webhook } from 'standardwebhooks';

/** Request headers as node:http gives them, a fetch `Headers`, or a plain object. */
export type DeliveryHeaders = Readonly<Record<string, string | string[] | undefined>> | { get(name: string): string | null };

/** What a verified delivery says about itself. */
export interface Delivery {
  /** The timer's id (`fermata-timer-id`, the same as `webhook-id`). */
  readonly timerId: string;
  /** Which attempt this is, from 1 (`fermata-attempt`). */
  readonly attempt: number;
  /** The timer's fire time as added, epoch ms (`fermata-fire-at`). */
  readonly fireAtMs: number;
  /** The timer's key, else its id (`idempotency-key`): drop a delivery whose key was already handled. */
  readonly idempotencyKey: string;
  /** When this attempt was signed (`webhook-timestamp`). */
  readonly signedAt: Date;
}

/** The request is not a delivery signed with any of the secrets (or its timestamp is too old or new). */
export class DeliveryVerificationError extends Error {
  readonly code = 'DELIVERY_UNVERIFIED';

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'DeliveryVerificationError';
  }
}

const signedHeaders = ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const;

/**
 * Verifies a delivery's signature with the signing secrets (`whsec_…`, as the service was given
 * them); returns what the delivery's headers say, or throws a DeliveryVerificationError.
 */
export function verifyDelivery(headers: DeliveryHeaders, body: string | Uint8Array, secrets: string | readonly string[]): Delivery {
  const read = (name: string): string | undefined => {
    const value = typeof headers.get === 'function' ? (headers.get(name) ?? undefined) : (headers as Readonly<Record<string, string | string[] | undefined>>)[name];
    return Array.isArray(value) ? value[0] : (value as string | undefined);
  };
  const signed: Record<string, string> = {};
  for (const name of signedHeaders) {
    const value = read(name);
    if (value === undefined) throw new DeliveryVerificationError(`the request has no ${name} header: not a signed delivery`);
    signed[name] = value;
  }
  const bytes = typeof body === 'string' ? Buffer.from(body) : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const list = typeof secrets === 'string' ? [secrets] : secrets;
  if (list.length === 0) throw new TypeError('verifyDelivery needs at least one signing secret');
  let failure: unknown;
  for (const secret of list) {
    try {
      new Webhook(secret).verify(bytes, signed, { jsonParse: false });
      return {
        timerId: read('fermata-timer-id') ?? (signed['webhook-id'] as string),
        attempt: Number(read('fermata-attempt') ?? 1),
        fireAtMs: Number(read('fermata-fire-at')),
        idempotencyKey: read('idempotency-key') ?? (signed['webhook-id'] as string),
        signedAt: new Date(Number(signed['webhook-timestamp']) * 1000),
      };
    } catch (err) {
      failure = err;
    }
  }
  throw new DeliveryVerificationError(`the delivery's signature does not verify: ${failure instanceof Error ? failure.message : String(failure)}`, { cause: failure });
}
