// The lines of POST /v1/timers/stream in cluster mode (the route and its stream are the single
// node's: routes/timer-stream.ts, timer-stream.ts): each line goes where a one-timer JSON add
// would go (cluster/router.ts). A line for a partition owned here joins that partition's admit
// coalescer, and its id is answered as a cluster id; a line for another node's partition is
// sent there as a one-timer add (forwarded once, with the stream's headers, so the owner checks
// the same token), and its answer, or refusal, is the line's; a line whose partition has no owner
// now is refused PARTITION_MOVING (503, retry it). Lines answer in input order whatever their
// partitions, as on one node. Main thread; one admitter per stream.
import type { AdmitWaiter } from '../../../engine/admit-coalescer.ts';
import type { TimerSpec } from '../../../engine/batch/timer-batch.ts';
import { errorCodes, FermataError } from '../../../engine/errors.ts';
import type { DuplicateAnswer, TimerStateName } from '../../../engine/types.ts';
import { clusterIdOf } from '../../../cluster/partitioning.ts';
import type { ClusterRouter } from '../../../cluster/router.ts';
import { type ErrorBody, httpErrorCodes, RelayedRefusal } from '../error-map.ts';
import { mediaTypes } from '../media-types.ts';
import type { LineAdmitter } from '../timer-stream.ts';
import type { ForwardAnswer, ForwardRequest } from './forwarder.ts';

export interface ClusterStreamOptions {
  readonly router: ClusterRouter;
  readonly send: (address: string, request: ForwardRequest) => Promise<ForwardAnswer>;
  /** The stream's request headers, sent with each forwarded line (its token, its trace state). */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** Whether the stream was itself forwarded (then nothing is forwarded again: one hop). */
  readonly forwarded: boolean;
}

/** A line's waiter for a partition owned here: the engine's id answered as the cluster's. */
class PartitionWaiter implements AdmitWaiter {
  readonly #partition: number;
  readonly #waiter: AdmitWaiter;

  constructor(partition: number, waiter: AdmitWaiter) {
    this.#partition = partition;
    this.#waiter = waiter;
  }

  admitted(id: string, duplicate: boolean, original: DuplicateAnswer | undefined): void {
    this.#waiter.admitted(clusterIdOf(this.#partition, id), duplicate, original);
  }

  refused(err: unknown): void {
    this.#waiter.refused(err);
  }
}

/** A timer spec as the one-timer JSON add takes it (fire_at in epoch ms: the line's delay_ms is already counted). */
function jsonOf(spec: TimerSpec): string {
  const payload = spec.payload;
  return JSON.stringify({
    fire_at: spec.fireAtMs,
    target: spec.target,
    ...(payload === undefined ? {} : typeof payload === 'string' ? { payload } : { payload_base64: Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString('base64') }),
    ...(spec.headers === undefined ? {} : { headers: spec.headers }),
    ...(spec.key === undefined ? {} : { key: spec.key }),
    ...(spec.queue === undefined ? {} : { queue: spec.queue }),
    ...(spec.callback === undefined ? {} : { callback: spec.callback }),
    ...(spec.failureCallback === undefined ? {} : { failure_callback: spec.failureCallback }),
  });
}

const moving = (partition: number | undefined): FermataError =>
  new FermataError(
    errorCodes.partitionMoving,
    partition === undefined ? 'no partition has an owner that can take this timer now: try again' : `partition ${partition} is moving between nodes (or its owner is out of reach): try again`,
  );

/** The owner's answer to a forwarded one-timer add, told to the line's waiter. */
function tell(waiter: AdmitWaiter, answer: ForwardAnswer): void {
  let body: unknown;
  try {
    body = JSON.parse(answer.body.toString('utf8'));
  } catch {
    body = undefined;
  }
  const fields = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  if ((answer.status === 201 || answer.status === 200) && typeof fields.id === 'string') {
    if (fields.duplicate !== true) return waiter.admitted(fields.id, false, undefined);
    const original: DuplicateAnswer = {
      state: fields.state as TimerStateName,
      revision: typeof fields.revision === 'number' ? fields.revision : 1,
      fireAtMs: Date.parse(String(fields.fire_at)),
      differs: Array.isArray(fields.differs) ? (fields.differs as DuplicateAnswer['differs']) : [],
    };
    return waiter.admitted(fields.id, true, original);
  }
  const retryAfter = Number(answer.headers['retry-after']);
  const error: ErrorBody =
    typeof fields.error === 'object' && fields.error !== null
      ? (fields as unknown as ErrorBody)
      : { error: { code: httpErrorCodes.internal, message: `the partition's owner answered ${answer.status}` } };
  waiter.refused(new RelayedRefusal(answer.status, Number.isInteger(retryAfter) ? retryAfter : undefined, error));
}

export class ClusterStreamAdmitter implements LineAdmitter {
  readonly #options: ClusterStreamOptions;

  constructor(options: ClusterStreamOptions) {
    this.#options = options;
  }

  admitOneTo(spec: TimerSpec, waiter: AdmitWaiter): void {
    const { router, forwarded } = this.#options;
    const partition = router.partitionForAdd(spec.key);
    if (partition === undefined) {
      // This node owns no partition: an unkeyed line goes to one that does.
      const address = forwarded ? undefined : router.anyOwnerAddress();
      if (address === undefined) queueMicrotask(() => waiter.refused(moving(undefined)));
      else this.#forward(address, spec, waiter);
      return;
    }
    const route = router.route(partition);
    if (route.kind === 'local') return router.coalescerOf(partition, route.engine).admitOneTo(spec, new PartitionWaiter(partition, waiter));
    if (route.kind === 'remote' && !forwarded) return this.#forward(route.address, spec, waiter);
    queueMicrotask(() => waiter.refused(moving(partition)));
  }

  #forward(address: string, spec: TimerSpec, waiter: AdmitWaiter): void {
    const { headers, send } = this.#options;
    const request: ForwardRequest = {
      method: 'POST',
      path: '/v1/timers',
      headers: { ...headers, 'content-type': mediaTypes.json, accept: 'application/json' },
      body: Buffer.from(jsonOf(spec)),
    };
    send(address, request).then(
      (answer) => tell(waiter, answer),
      (err: unknown) => waiter.refused(err),
    );
  }
}
