// What the Arrow Flight service (flight-service.ts) needs of the timers it serves, and the
// single-node implementation over one engine; a cluster node's is cluster-flight-timers.ts,
// which hands each call to the node's front. The service does the protocol (messages, record
// batches, the order of PutResults, the bound on batches in flight, tokens); this is what a
// call asks of the service's state:
//
//   put     one record batch (an Arrow IPC stream: schema, dictionaries, the batch) admitted
//           whole, resolved once durable with its PutResult's app_metadata (put-result.ts),
//           refused whole with the error that says why
//   queues  every queue with its config (ListFlights, GetFlightInfo); queue: one, or undefined
//   pull    "pull" delivery's leases (DoGet, DoAction), or why this service does not serve them
//
// Main thread.
import type { PullQueues } from '../../dispatch/pull-queues.ts';
import type { Engine } from '../../engine/engine.ts';
import type { QueueConfig } from '../../engine/queues.ts';
import { type PutResultForm, putResultMetadata } from './put-result.ts';

/** What a call carries that the timers' side may need again (a cluster node's front checks the token itself). */
export interface CallHeaders {
  /** The call's `authorization` metadata, as sent. */
  readonly authorization: string | undefined;
}

export interface FlightQueue {
  readonly name: string;
  readonly config: QueueConfig;
}

export interface FlightTimers {
  /**
   * Admits the record batch `ipc` whole. It starts before this returns (a call's batches are
   * admitted in the order they are put); resolves once durable with the PutResult's app_metadata
   * in `form`; rejects with what refused it.
   */
  put(ipc: Uint8Array, form: PutResultForm, call: CallHeaders): Promise<Uint8Array>;
  /** Every queue configured or holding a timer, with its config. */
  queues(call: CallHeaders): Promise<readonly FlightQueue[]>;
  /** One queue, or undefined when it was never configured and never held a timer. */
  queue(name: string, call: CallHeaders): Promise<FlightQueue | undefined>;
  /** "pull" queues' due timers; or, where DoGet and DoAction are not served, why (their UNIMPLEMENTED text). */
  readonly pull: PullQueues | { readonly unserved: string };
}

/** One engine's timers, and its dispatcher's pull queues: `fermata serve --flight` on a single node. */
export function engineFlightTimers(engine: Engine, pull: PullQueues): FlightTimers {
  const queueOf = (name: string): FlightQueue => ({ name, config: engine.queueConfig(name) });
  return {
    put: async (ipc, form) => putResultMetadata(await engine.admitArrow(ipc), form, ipc),
    queues: async () => engine.queues().map(({ name }) => queueOf(name)),
    queue: async (name) => (engine.queues().some((entry) => entry.name === name) ? queueOf(name) : undefined),
    pull,
  };
}
