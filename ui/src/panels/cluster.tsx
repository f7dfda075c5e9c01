// Cluster (only when the service runs as a cluster node: GET /v1/cluster answers): this node,
// the partitions it owns with their epochs, every partition's owner, and the nodes that did not
// answer or partitions without an owner (from GET /v1/stats's cluster part).
import { api } from '../api.ts';
import { ErrorNote, Figure, Scroll, Section, useLoad } from '../common.tsx';
import { count } from '../format.ts';
import type { ClusterStats, ClusterView } from '../types.ts';

const refreshMs = 5_000;

export function Cluster({ stats }: { stats: ClusterStats | undefined }) {
  const view = useLoad(() => api<ClusterView>('GET', '/v1/cluster'), [], refreshMs);
  const data = view.data;
  return (
    <Section id="cluster" title="Cluster">
      <ErrorNote error={view.error} />
      {data !== undefined ? (
        <>
          <dl class="figures">
            <Figure name="node_id" label="This node" value={data.node_id} />
            <Figure name="partitions" label="Partitions" value={count(data.partitions)} />
            <Figure name="owned" label="Owned here" value={count(data.owned.length)} />
            {stats !== undefined ? <Figure name="nodes" label="Nodes answering" value={count(stats.cluster.nodes)} /> : null}
            {stats !== undefined ? <Figure name="unreachable" label="Unreachable" value={stats.cluster.unreachable.length === 0 ? 'none' : stats.cluster.unreachable.join(', ')} /> : null}
            {stats !== undefined ? <Figure name="moving" label="Without an owner" value={stats.cluster.moving.length === 0 ? 'none' : stats.cluster.moving.join(', ')} /> : null}
          </dl>
          <Scroll label="Partitions table">
            <table>
              <thead>
                <tr>
                  <th scope="col">Partition</th>
                  <th scope="col">Owner</th>
                  <th scope="col">Epoch (owned here)</th>
                  <th scope="col">Records a takeover replays (owned here)</th>
                </tr>
              </thead>
              <tbody>
                {data.owners.map((owner) => (
                  <tr key={owner.partition}>
                    <th scope="row">{owner.partition}</th>
                    <td>{owner.here ? `this node (${owner.address ?? data.node_id})` : (owner.address ?? 'none')}</td>
                    <td>{String(data.owned.find((owned) => owned.partition === owner.partition)?.epoch ?? '–')}</td>
                    <td data-field="replay_records">{String(data.owned.find((owned) => owned.partition === owner.partition)?.replay_records ?? '–')}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
        </>
      ) : null}
    </Section>
  );
}
