// Which node should own which partition: rendezvous (highest random weight) hashing with
// bounded loads. Every node computes the same assignment from the same list of live nodes, with
// no coordination: partition p goes to the node of highest weight(p, node) that still has room,
// partitions taken in order, where "room" holds every node to ⌈P/N⌉ and only P mod N of them
// to more than ⌊P/N⌋, so each node's share is within one of P/N.
//
//   weight(p, node) = first 48 bits of SHA-256("p/node")
//   partition:   0      1      2     …
//   ranking:   [b,a,c] [a,c,b] [c,b,a]   → the first with room: b, a, c, …
//
// Plain rendezvous hashing moves only the partitions of a node that joins or leaves, but leaves
// shares uneven (±2.7 for 32 partitions on 3 nodes); the bound costs a few more moves on a
// change and keeps the shares even. Pure functions; any thread.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';

function weight(partition: number, nodeId: string): number {
  return createHash('sha256').update(`${partition}/${nodeId}`).digest().readUIntBE(0, 6);
}

/**
 * The node each partition should belong to (index = partition), over `nodeIds` (live nodes, at
 * least one, no repeats; their order does not matter).
 */
export function assignPartitions(partitions: number, nodeIds: readonly string[]): string[] {
  assert.ok(Number.isSafeInteger(partitions) && partitions > 0, `a cluster has a positive number of partitions, not ${partitions}`);
  assert.ok(nodeIds.length > 0, 'partitions are assigned over at least one node');
  const nodes = [...new Set(nodeIds)].sort();
  assert.equal(nodes.length, nodeIds.length, 'node ids are distinct');
  const floor = Math.floor(partitions / nodes.length);
  let ceilingsLeft = partitions % nodes.length;
  const load = new Array<number>(nodes.length).fill(0);
  const owners: string[] = [];
  const ranking = nodes.map((_, index) => index);
  for (let partition = 0; partition < partitions; partition += 1) {
    const weights = nodes.map((node) => weight(partition, node));
    ranking.sort((a, b) => (weights[b] ?? 0) - (weights[a] ?? 0) || a - b);
    const chosen = ranking.find((index) => (load[index] ?? 0) < floor || ((load[index] ?? 0) === floor && ceilingsLeft > 0));
    assert.ok(chosen !== undefined, 'the loads leave room for every partition');
    if (load[chosen] === floor) ceilingsLeft -= 1;
    load[chosen] = (load[chosen] ?? 0) + 1;
    owners.push(nodes[chosen] as string);
  }
  return owners;
}

/** The partitions `assignPartitions` gives `nodeId`. */
export function targetSet(owners: readonly string[], nodeId: string): Set<number> {
  const mine = new Set<number>();
  owners.forEach((owner, partition) => {
    if (owner === nodeId) mine.add(partition);
  });
  return mine;
}
