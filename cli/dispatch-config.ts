// `fermata serve`'s delivery settings: the "dispatch" object of the config file, with
// environment overrides, checked whole at start-up so a bad allow entry or signing secret
// stops the service with a message naming it, before anything listens.
//
//   "dispatch": {
//     "threads": 1,                              delivery worker threads (default: cores − 1, ≥ 1)
//     "allow": ["https://hooks.internal:443",    origins and CIDRs let through the target guard
//               "10.20.0.0/16"],
//     "signing_secrets": ["whsec_…"],            Standard Webhooks secrets; several sign at once
//     "queue_signing_secrets": {                 a queue's own secrets, signing its deliveries
//       "payments": ["whsec_…"]},                instead of the service's (dispatch/signing-config.ts)
//     "ca_file": "/etc/fermata/targets-ca.pem"   extra CA certificates for https targets
//   }
//
// Environment: FERMATA_DISPATCH_ALLOW and FERMATA_SIGNING_SECRETS (comma-separated) replace
// the config file's lists. Loopback targets are allowed exactly when the service listens on
// loopback itself (a local setup), unless "allow" lists them.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { TargetAllowEntryError, TargetGuard } from '../dispatch/target-guard.ts';
import { SigningSecretError, WebhookSigner } from '../dispatch/signing.ts';

export interface DispatchSettings {
  readonly threads?: number;
  readonly allow: readonly string[];
  readonly signingSecrets: readonly string[];
  /** Queues with their own signing secrets, by name (each list non-empty). */
  readonly queueSigningSecrets: Readonly<Record<string, readonly string[]>>;
  readonly ca?: string;
}

export const dispatchConfigKeys = ['threads', 'allow', 'signing_secrets', 'queue_signing_secrets', 'ca_file'] as const;

/** A dispatch setting that cannot be used; the message names it. */
export class DispatchConfigError extends Error {
  override readonly name = 'DispatchConfigError';
}

const threadsMax = 64;

function stringList(value: unknown, where: string): string[] {
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string')) throw new DispatchConfigError(`${where} must be an array of strings`);
  return value as string[];
}

function fromEnv(value: string | undefined): string[] | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  return value.split(',').map((item) => item.trim()).filter((item) => item !== '');
}

/**
 * The settings from the config file's "dispatch" value (undefined when absent) and the
 * environment; `file` names the config file in messages, and a relative ca_file is taken from `base`.
 */
export function parseDispatchSettings(entry: unknown, file: string | undefined, env: NodeJS.ProcessEnv, base: string): DispatchSettings {
  const where = (key: string): string => (file === undefined ? `"dispatch.${key}"` : `config file ${file}: "dispatch.${key}"`);
  const given: Record<string, unknown> = {};
  if (entry !== undefined) {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw new DispatchConfigError(`config file ${file}: "dispatch" must be a JSON object (with the keys ${dispatchConfigKeys.join(', ')})`);
    for (const [key, value] of Object.entries(entry)) {
      if (!(dispatchConfigKeys as readonly string[]).includes(key)) throw new DispatchConfigError(`config file ${file}: unknown key "dispatch.${key}" (known keys: ${dispatchConfigKeys.map((name) => `dispatch.${name}`).join(', ')})`);
      given[key] = value;
    }
  }
  let threads: number | undefined;
  if (given.threads !== undefined) {
    if (typeof given.threads !== 'number' || !Number.isInteger(given.threads) || given.threads < 1 || given.threads > threadsMax) throw new DispatchConfigError(`${where('threads')} must be a whole number from 1 to ${threadsMax}`);
    threads = given.threads;
  }
  const allowSource = fromEnv(env.FERMATA_DISPATCH_ALLOW) === undefined ? where('allow') : 'FERMATA_DISPATCH_ALLOW';
  const allow = fromEnv(env.FERMATA_DISPATCH_ALLOW) ?? (given.allow === undefined ? [] : stringList(given.allow, where('allow')));
  const secretsSource = fromEnv(env.FERMATA_SIGNING_SECRETS) === undefined ? where('signing_secrets') : 'FERMATA_SIGNING_SECRETS';
  const signingSecrets = fromEnv(env.FERMATA_SIGNING_SECRETS) ?? (given.signing_secrets === undefined ? [] : stringList(given.signing_secrets, where('signing_secrets')));
  try {
    new TargetGuard({ allow });
  } catch (err) {
    if (err instanceof TargetAllowEntryError) throw new DispatchConfigError(`${allowSource}: ${err.message}`);
    throw err;
  }
  try {
    if (signingSecrets.length > 0) new WebhookSigner(signingSecrets);
  } catch (err) {
    if (err instanceof SigningSecretError) throw new DispatchConfigError(`${secretsSource}: ${err.message}`);
    throw err;
  }
  const queueSigningSecrets = queueSecrets(given.queue_signing_secrets, where('queue_signing_secrets'));
  let ca: string | undefined;
  if (given.ca_file !== undefined) {
    if (typeof given.ca_file !== 'string') throw new DispatchConfigError(`${where('ca_file')} must be a file name`);
    try {
      ca = readFileSync(resolve(base, given.ca_file), 'utf8');
    } catch (err) {
      throw new DispatchConfigError(`${where('ca_file')}: cannot read ${given.ca_file}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return { allow, signingSecrets, queueSigningSecrets, ...(threads === undefined ? {} : { threads }), ...(ca === undefined ? {} : { ca }) };
}

/** "queue_signing_secrets": {QUEUE: ["whsec_…", …]}, each list non-empty and each secret well-formed. */
function queueSecrets(value: unknown, where: string): Record<string, readonly string[]> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new DispatchConfigError(`${where} must be a JSON object of queue name → array of secrets`);
  const secrets: Record<string, readonly string[]> = {};
  for (const [queue, list] of Object.entries(value)) {
    const named = `${where}, queue ${JSON.stringify(queue)}`;
    const given = stringList(list, named);
    if (given.length === 0) throw new DispatchConfigError(`${named} must list at least one secret (a queue without its own uses the service's)`);
    try {
      new WebhookSigner(given);
    } catch (err) {
      if (err instanceof SigningSecretError) throw new DispatchConfigError(`${named}: ${err.message}`);
      throw err;
    }
    secrets[queue] = given;
  }
  return secrets;
}
