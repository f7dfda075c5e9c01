// Whether a gRPC call may go on: the HTTP API's bearer check (http/listen/bearer-auth.ts) on the
// call's `authorization` metadata, as the Flight service applies it. Every fermata.v1.Timers
// method asks here and nowhere else, naming itself, so a rule per method is a change of this
// function alone. Main thread.
import type { Metadata } from '@grpc/grpc-js';
import type { BearerCheck } from '../http/listen/bearer-auth.ts';

/** True when `check` is undefined (no tokens configured) or the call presents one of its tokens; `method` is the call's gRPC path (every token may call every method today). */
export function callAllowed(check: BearerCheck | undefined, metadata: Metadata, _method: string): boolean {
  if (check === undefined) return true;
  const header = metadata.get('authorization')[0];
  return check.allows('', typeof header === 'string' ? header : undefined);
}
