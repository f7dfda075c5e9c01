// A test fixture: the PartitionDirectory a cluster node gives the HTTP side
// (cluster/partition-directory.ts), over real engines in this process, each partition's on a
// simulated file system of its own, with owners' addresses the test sets. Several of these,
// each behind a real HTTP server, are a cluster for the router's tests without PostgreSQL.
import { Engine } from '../../engine/engine.ts';
import type { PartitionDirectory } from '../../cluster/partition-directory.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

export class FixtureDirectory implements PartitionDirectory {
  readonly partitions: number;
  readonly nodeId: string;
  readonly #engines = new Map<number, Engine>();
  readonly #addresses = new Map<number, string>();
  readonly #listeners = new Set<() => void>();

  constructor(nodeId: string, partitions: number) {
    this.nodeId = nodeId;
    this.partitions = partitions;
  }

  engineOf(partition: number): Engine | undefined {
    return this.#engines.get(partition);
  }

  owned(): readonly number[] {
    return [...this.#engines.keys()].sort((a, b) => a - b);
  }

  ownerAddress(partition: number): string | undefined {
    return this.#addresses.get(partition);
  }

  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** This node owns `partition` now, with a fresh engine of its own. */
  async take(partition: number, seed: number): Promise<Engine> {
    const engine = await Engine.open({ dataDir: `/p${partition}`, fs: new SimFileSystem({ seed }) });
    this.#engines.set(partition, engine);
    for (const listener of this.#listeners) listener();
    return engine;
  }

  /** Where `partition`'s owner serves; undefined: it moves. */
  setAddress(partition: number, address: string | undefined): void {
    if (address === undefined) this.#addresses.delete(partition);
    else this.#addresses.set(partition, address);
  }

  async close(): Promise<void> {
    for (const engine of this.#engines.values()) await engine.close();
    this.#engines.clear();
  }
}
