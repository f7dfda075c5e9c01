// The partition directory `fermata serve --cluster` gives its HTTP server, which listens before
// the node joins (the port it binds is the address the node advertises): until the node is
// attached it owns nothing and knows no owner, so every request on a timer answers
// PARTITION_MOVING and /readyz is red; once attached it is the node's directory, and those who
// listened for changes are told. Main thread.
import type { ClusterNode } from '../../cluster/node.ts';
import type { PartitionDirectory } from '../../cluster/partition-directory.ts';
import type { Dispatcher } from '../../dispatch/dispatcher.ts';
import type { Engine } from '../../engine/engine.ts';

export class JoiningDirectory implements PartitionDirectory {
  readonly partitions: number;
  readonly nodeId: string;
  readonly #listeners = new Set<() => void>();
  #node: ClusterNode | undefined;

  /** `partitions` as the cluster database holds it, read before listening, so cluster ids parse from the first request. */
  constructor(partitions: number, nodeId: string) {
    this.partitions = partitions;
    this.nodeId = nodeId;
  }

  get joined(): boolean {
    return this.#node !== undefined;
  }

  attach(node: ClusterNode): void {
    this.#node = node;
    node.onChange(() => this.#changed());
    this.#changed();
  }

  engineOf(partition: number): Engine | undefined {
    return this.#node?.engineOf(partition);
  }

  owned(): readonly number[] {
    return this.#node?.owned() ?? [];
  }

  ownerAddress(partition: number): string | undefined {
    return this.#node?.ownerAddress(partition);
  }

  dispatcherOf(partition: number): Dispatcher | undefined {
    return this.#node?.dispatcherOf(partition);
  }

  epochOf(partition: number): bigint | undefined {
    return this.#node?.epochOf(partition);
  }

  get sendsRefused(): number {
    return this.#node?.sendsRefused ?? 0;
  }

  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #changed(): void {
    for (const listener of this.#listeners) listener();
  }
}
