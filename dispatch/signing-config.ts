// What a reload may change in the delivery workers (cli/serve/reload.ts), and the signing plan
// both threads derive from it. The service's signing secrets sign every delivery unless the
// timer's queue has its own (config "dispatch"."queue_signing_secrets": {QUEUE: ["whsec_…"]}),
// which then sign it instead; rotation is as for the service's: several secrets sign at once.
//
//   signer index   0: the service's secrets (none: unsigned)   1…n: the queues' own, by name order
//
// The main thread writes each timer's signer index into its task (task-builder.ts, meta's
// signerField), looked up by queue index once per queue (Dispatcher); a worker builds the same
// table of WebhookSigners from the same settings and signs with the one the index names. A
// reload sends the new settings to every worker (ReconfigureRequest on the pool's channel) and
// waits for each to answer before the main thread uses the new indexes.
import { WebhookSigner } from './signing.ts';

export interface DeliveryAccess {
  readonly allow: readonly string[];
  readonly signingSecrets: readonly string[];
  /** Queues with their own signing secrets, by name. */
  readonly queueSigningSecrets: Readonly<Record<string, readonly string[]>>;
}

/** The queues with their own secrets, in signer-index order (index = position + 1). */
function signedQueues(access: DeliveryAccess): string[] {
  return Object.keys(access.queueSigningSecrets).sort();
}

/** Main thread: queue name → signer index. */
export function signerIndexes(access: DeliveryAccess): ReadonlyMap<string, number> {
  return new Map(signedQueues(access).map((queue, at) => [queue, at + 1]));
}

/** A worker: the signers by index (undefined: that index signs nothing). Throws SigningSecretError for a malformed secret. */
export function signersOf(access: DeliveryAccess): Array<WebhookSigner | undefined> {
  const service = access.signingSecrets.length === 0 ? undefined : new WebhookSigner(access.signingSecrets);
  return [service, ...signedQueues(access).map((queue) => new WebhookSigner(access.queueSigningSecrets[queue] ?? []))];
}

/** Posted on the pool's reconfigure channel: the settings to put in force. */
export interface ReconfigureRequest {
  readonly id: number;
  readonly access: DeliveryAccess;
}

/** A worker's answer on its parent port once it has them. */
export interface ReconfiguredMessage {
  readonly kind: typeof reconfiguredKind;
  readonly id: number;
  /** Why the worker could not take them (it keeps the old ones), when it could not. */
  readonly failure: string | undefined;
}

export const reconfiguredKind = 'fermata.delivery-worker.reconfigured';

export function isReconfiguredMessage(message: unknown): message is ReconfiguredMessage {
  return typeof message === 'object' && message !== null && (message as { kind?: unknown }).kind === reconfiguredKind;
}
