// Whether a gRPC call may go on: the one access check of every transport (ingest/auth/access.ts)
// on the call's `authorization` metadata, with the scope its method needs. Every
// fermata.v1.Timers method asks here and nowhere else, naming itself. The scopes follow the HTTP
// routes each method stands for (docs/api.md, "gRPC"): reads need "read"; adds, cancels and
// reschedules of single timers "write"; bulk cancels, queue changes and dead-letter actions
// "admin". A token limited to queues is refused here (PERMISSION_DENIED): the gRPC methods take
// filters and batches this check does not read row by row, and a check half made would let such a
// token act beyond its queues; it is served over HTTP and Flight, which check every row. Main thread.
import type { Metadata } from '@grpc/grpc-js';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import type { Access, Scope } from '../auth/access.ts';

/** The scope each fermata.v1.Timers method needs (every method of the .proto has one: a unit test holds it). */
export const methodScopes: Readonly<Record<string, Scope>> = {
  AddTimer: 'write',
  AddTimers: 'write',
  StreamAddTimers: 'write',
  GetTimer: 'read',
  CancelTimer: 'write',
  RescheduleTimer: 'write',
  ListTimers: 'read',
  ExportTimers: 'read',
  CancelTimers: 'admin',
  ListQueues: 'read',
  GetQueue: 'read',
  SetQueue: 'admin',
  DeleteQueue: 'admin',
  PauseQueue: 'admin',
  ResumeQueue: 'admin',
  PurgeQueue: 'admin',
  ListDeadTimers: 'read',
  RetryDeadTimer: 'admin',
  DiscardDeadTimer: 'admin',
};

/** Why the call at `path` (/fermata.v1.Timers/Method) may not go on (UNAUTHORIZED or FORBIDDEN), or undefined when it may. */
export function callRefusal(access: Access, metadata: Metadata, path: string): FermataError | undefined {
  const method = path.slice(path.lastIndexOf('/') + 1);
  // A method without an entry is refused rather than guessed at (the unit test keeps this unreachable).
  const scope = methodScopes[method] ?? 'admin';
  const header = metadata.get('authorization')[0];
  try {
    const caller = access.authorize(typeof header === 'string' ? header : undefined, scope);
    if (caller.queues === undefined) return undefined;
    return new FermataError(errorCodes.forbidden, `token "${caller.name}" is limited to queues, and the gRPC API takes tokens for every queue: use it over HTTP or Flight`, { scope });
  } catch (err) {
    if (err instanceof FermataError) return err;
    throw err;
  }
}
