// What a DoGet ticket and a DoAction "ack"/"nack" body say, for pull delivery (dispatch/pull-queues.ts).
//
//   ticket  = QUEUE                       a bare queue name (UTF-8), or
//           | {"queue": QUEUE,            UTF-8 JSON: the queue to take due timers from,
//              "max_rows": N,             at most N rows (1…100,000; the queue's batch_rows_max caps it),
//              "wait_ms": W,              with none waiting, wait up to W ms for some (0…20,000; default 0),
//              "ack": LEASE}              first ack the lease of the previous DoGet (durably)
//   action body = LEASE | {"lease": LEASE}
//
// A malformed one is refused INVALID_ARGUMENT naming the field. Pure; main thread.
import { status } from '@grpc/grpc-js';
import { timerLimits } from '../../engine/limits.ts';
import { pullLimits } from '../../dispatch/pull-queues.ts';
import { FlightFailure } from './status-map.ts';

export interface PullTicket {
  readonly queue: string;
  readonly maxRows: number | undefined;
  readonly waitMs: number;
  readonly ack: string | undefined;
}

/** Rows one DoGet may ask for: queue configs cap batch_rows_max at the same. */
const maxRowsMax = 100_000;
/** Bytes of a lease id at most (fermata's are 28). */
const leaseBytesMax = 128;
const ticketFields = ['queue', 'max_rows', 'wait_ms', 'ack'];
const decoder = new TextDecoder('utf-8', { fatal: true });

function invalid(message: string): FlightFailure {
  return new FlightFailure(status.INVALID_ARGUMENT, `invalid ticket: ${message}`);
}

function text(bytes: Uint8Array, what: string): string {
  try {
    return decoder.decode(bytes);
  } catch {
    throw new FlightFailure(status.INVALID_ARGUMENT, `${what} is not UTF-8`);
  }
}

function wholeNumber(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) throw invalid(`${field} must be a whole number from ${min} to ${max}`);
  return value;
}

function leaseId(value: unknown, where: string): string {
  if (typeof value !== 'string' || value === '' || Buffer.byteLength(value) > leaseBytesMax) throw new FlightFailure(status.INVALID_ARGUMENT, `${where} must be a lease id (a string of 1 to ${leaseBytesMax} bytes)`);
  return value;
}

export function parsePullTicket(bytes: Uint8Array): PullTicket {
  const ticket = text(bytes, 'the ticket');
  if (ticket === '') throw invalid('it is empty; give a queue name or {"queue": …}');
  if (!ticket.startsWith('{')) {
    if (Buffer.byteLength(ticket) > timerLimits.queueNameBytesMax) throw invalid(`a queue name has at most ${timerLimits.queueNameBytesMax} bytes`);
    return { queue: ticket, maxRows: undefined, waitMs: 0, ack: undefined };
  }
  let value: unknown;
  try {
    value = JSON.parse(ticket);
  } catch (err) {
    throw invalid(`not JSON (${(err as Error).message})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid('a JSON ticket must be an object');
  const given = value as Record<string, unknown>;
  for (const key of Object.keys(given)) if (!ticketFields.includes(key)) throw invalid(`unknown field ${key} (known: ${ticketFields.join(', ')})`);
  if (typeof given.queue !== 'string' || given.queue === '' || Buffer.byteLength(given.queue) > timerLimits.queueNameBytesMax) {
    throw invalid(`queue must be a queue name (1 to ${timerLimits.queueNameBytesMax} bytes)`);
  }
  return {
    queue: given.queue,
    maxRows: given.max_rows === undefined ? undefined : wholeNumber(given.max_rows, 'max_rows', 1, maxRowsMax),
    waitMs: given.wait_ms === undefined ? 0 : wholeNumber(given.wait_ms, 'wait_ms', 0, pullLimits.getWaitMsMax),
    ack: given.ack === undefined ? undefined : leaseId(given.ack, 'ack'),
  };
}

/** The lease an "ack" or "nack" action's body names. */
export function parseLeaseBody(bytes: Uint8Array): string {
  const body = text(bytes, 'the action body').trim();
  if (!body.startsWith('{')) return leaseId(body, 'the action body');
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (err) {
    throw new FlightFailure(status.INVALID_ARGUMENT, `the action body is not JSON (${(err as Error).message})`);
  }
  return leaseId((value as { lease?: unknown }).lease, 'the action body\'s "lease"');
}
