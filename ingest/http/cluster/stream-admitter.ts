// The lines of POST /v1/timers/stream in cluster mode (the route and its stream are the single
// node's: routes/timer-stream.ts, timer-stream.ts): each line goes where a one-timer JSON add
// would go (cluster/router.ts). A line for a partition owned here joins that partition's admit
// coalescer, and its id is answered as a cluster id; a line for another node's partition is
// sent there as a one-timer add (forwarded once, with the stream's headers, so the owner checks
// the same token; a turn's adds for one owner in one request: forwarded-adds.ts), and the owner's
// answer to it, or refusal, is the line's; a line whose partition has no owner
// now is refused PARTITION_MOVING (503, retry it). Lines answer in input order whatever their
// partitions, as on one node. Main thread; one admitter per stream.
import type { AdmitWaiter } from '../../../engine/admit-coalescer.ts';
import type { TimerSpec } from '../../../engine/batch/timer-batch.ts';
import { errorCodes, FermataError } from '../../../engine/errors.ts';
import type { DuplicateAnswer } from '../../../engine/types.ts';
import { clusterIdOf } from '../../../cluster/partitioning.ts';
import type { ClusterRouter } from '../../../cluster/router.ts';
import type { LineAdmitter } from '../timer-stream.ts';
import { type ForwardedAdds, jsonOf, ToldAdmitWaiter } from './forwarded-adds.ts';

export interface ClusterStreamOptions {
  readonly router: ClusterRouter;
  /** Where adds for another node go: a turn's for one owner in one request (forwarded-adds.ts). */
  readonly adds: ForwardedAdds;
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

const moving = (partition: number | undefined): FermataError =>
  new FermataError(
    errorCodes.partitionMoving,
    partition === undefined ? 'no partition has an owner that can take this timer now: try again' : `partition ${partition} is moving between nodes (or its owner is out of reach): try again`,
  );

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
    this.#options.adds.add(address, this.#options.headers, jsonOf(spec), new ToldAdmitWaiter(waiter));
  }
}
