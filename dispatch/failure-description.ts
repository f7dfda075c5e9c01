// Why a delivery attempt failed, in words a user reads in last_error (GET /v1/timers/{id},
// /v1/dead) and as a kind /metrics counts (fermata_delivery_failures_total{kind}). Pure: a
// delivery worker describes the error it caught, the main thread describes an answered status
// (an "arrow" batch's answer, and the status a worker sends back as a number, not as text).
//
//   kind     text
//   status   HTTP 503
//   timeout  timeout after 10000 ms
//   connect  connection refused | connection reset | host not found | host unreachable
//   tls      TLS: certificate has expired
//   guard    refused by the SSRF guard: 10.0.0.7 is a private address
//   other    the error's own message
import { errorCodes } from '../engine/errors.ts';
import { boundErrorText } from '../engine/records.ts';

/** How an attempt failed: a byte in the worker's results, a label of the failures counter. */
export const failureKind = { none: 0, status: 1, timeout: 2, connect: 3, tls: 4, guard: 5, other: 6 } as const;
export type FailureKind = (typeof failureKind)[keyof typeof failureKind];

/** The label of each kind, indexed by its byte (none has no label). */
export const failureKindNames = ['', 'status', 'timeout', 'connect', 'tls', 'guard', 'other'] as const;

export interface FailureDescription {
  readonly kind: FailureKind;
  readonly text: string;
}

const timeoutCodes = new Set(['ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
const connectTexts: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EPIPE: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found (DNS lookup failed)',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
};
// OpenSSL's certificate verdicts (Node gives them as codes), and Node's own TLS and SSL errors.
const tlsCodes = new Set([
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'HOSTNAME_MISMATCH',
]);
const isTlsCode = (code: string): boolean => tlsCodes.has(code) || code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_');
// HTTP clients wrap the error that failed a request, so the telling one may sit a few causes deep.
const causeDepthMax = 4;

/** The text of an answered status that is not a success. */
export function statusFailureText(status: number): string {
  return `HTTP ${status}`;
}

/** What an error thrown by an attempt whose deadline was `timeoutMs` means, in words. */
export function describeFailure(err: unknown, timeoutMs: number): FailureDescription {
  let timedOut = false;
  let current: unknown = err;
  for (let depth = 0; depth <= causeDepthMax && typeof current === 'object' && current !== null; depth++) {
    const { code, name, message } = current as { code?: unknown; name?: unknown; message?: unknown };
    const text = typeof message === 'string' ? message : '';
    if (code === errorCodes.targetRefused) return { kind: failureKind.guard, text: boundErrorText(`refused by the SSRF guard: ${text}`) };
    if (name === 'TimeoutError' || (typeof code === 'string' && timeoutCodes.has(code))) timedOut = true;
    else if (typeof code === 'string' && isTlsCode(code)) return { kind: failureKind.tls, text: boundErrorText(`TLS: ${innermostMessage(current)}`) };
    else if (typeof code === 'string' && connectTexts[code] !== undefined) return { kind: failureKind.connect, text: connectTexts[code] as string };
    current = (current as { cause?: unknown }).cause;
  }
  if (timedOut) return { kind: failureKind.timeout, text: `timeout after ${timeoutMs} ms` };
  return { kind: failureKind.other, text: boundErrorText(err instanceof Error ? err.message : String(err)) };
}

/** The message of the deepest cause (the library's own words, not a wrapper's). */
function innermostMessage(err: unknown): string {
  let message = err instanceof Error ? err.message : String(err);
  let current: unknown = err;
  for (let depth = 0; depth <= causeDepthMax && current instanceof Error; depth++) {
    message = current.message;
    current = current.cause;
  }
  return message;
}
