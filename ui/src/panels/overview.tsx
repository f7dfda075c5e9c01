// Overview: the counts (from the live stream or the polling, main.tsx), waiting timers by when
// they are due (due.tsx), the last 15 minutes' rates and lateness (rates.tsx), memory budget, log
// health and the data directory's disk; in cluster mode the cluster's totals and this node's,
// and the cluster's histogram and rates (the node sums them over the cluster's owners).
import { Figure, Section } from '../common.tsx';
import { bytes, count, localTime, percent } from '../format.ts';
import { type Counts, isClusterStats, type NodeStats, type Stats } from '../types.ts';
import { DueTimes } from './due.tsx';
import { Rates } from './rates.tsx';

const countLabels: readonly (readonly [keyof Counts, string])[] = [
  ['pending', 'Pending'],
  ['resident', 'Resident'],
  ['spilled', 'Spilled'],
  ['in_flight', 'In flight'],
  ['delivered', 'Delivered'],
  ['dead', 'Dead'],
];

function CountFigures({ counts, extra }: { counts: Counts; extra?: NodeStats }) {
  return (
    <dl class="figures">
      {countLabels.map(([name, label]) => (
        <Figure key={name} name={name} label={label} value={count(counts[name])} />
      ))}
      {extra !== undefined ? <Figure name="held" label="Held (paused queues)" value={count(extra.held)} /> : null}
    </dl>
  );
}

function Budget({ stats }: { stats: NodeStats }) {
  const memory = stats.memory;
  const used = memory.resident_bytes + memory.spill_metadata_bytes + memory.add_times_bytes;
  return (
    <Section id="budget" title="Memory budget">
      <dl class="figures">
        <Figure name="memory_used" label="Memory used" value={bytes(used)} />
        <Figure name="memory_budget" label="Memory budget" value={memory.budget_bytes === null ? 'none' : bytes(memory.budget_bytes)} />
        <Figure name="memory_share" label="Of the budget" value={memory.budget_bytes === null ? '–' : percent(used, memory.budget_bytes)} />
      </dl>
      {memory.budget_bytes !== null ? <meter min={0} max={memory.budget_bytes} value={used} aria-label="Memory used of the budget" /> : null}
    </Section>
  );
}

function Wal({ stats }: { stats: NodeStats }) {
  const wal = stats.wal;
  return (
    <Section id="wal" title="Write-ahead log">
      <dl class="figures">
        <Figure name="wal_health" label="Health" value={wal.poisoned ? 'poisoned: writes refused' : 'ok'} />
        <Figure name="wal_last_seq" label="Last record" value={count(wal.last_seq)} />
        <Figure name="wal_appends" label="Appends" value={count(wal.appends)} />
        <Figure name="wal_syncs" label="Syncs" value={count(wal.syncs)} />
        <Figure name="wal_last_sync" label="Last durable write" value={wal.last_sync_at === null ? 'none since the start' : localTime(wal.last_sync_at).text} />
      </dl>
    </Section>
  );
}

function Disk({ disk }: { disk: NonNullable<NodeStats['disk']> }) {
  return (
    <Section id="disk" title="Disk">
      <dl class="figures">
        <Figure name="disk_data" label="Data directory" value={disk.data_bytes === null ? 'measuring…' : bytes(disk.data_bytes)} />
        <Figure name="disk_free" label="Free" value={disk.free_bytes === null ? 'unknown' : bytes(disk.free_bytes)} />
        <Figure name="disk_free_min" label="Free minimum (adds refused below)" value={bytes(disk.free_bytes_min)} />
      </dl>
    </Section>
  );
}

export function Overview({ stats }: { stats: Stats | undefined }) {
  if (stats === undefined) return <p>Waiting for the first figures…</p>;
  if (isClusterStats(stats)) {
    return (
      <>
        <Section id="cluster-totals" title={`Cluster (${count(stats.cluster.nodes)} nodes answering)`}>
          <CountFigures counts={stats.cluster.totals} />
        </Section>
        <Section id="node-totals" title={`This node (${stats.node.node_id})`}>
          <CountFigures counts={stats.node.totals} />
        </Section>
        <DueTimes />
        <Rates />
      </>
    );
  }
  return (
    <>
      <Section id="counts" title="Timers">
        <CountFigures counts={stats} extra={stats} />
      </Section>
      <DueTimes />
      <Rates />
      <div class="pair">
        <Budget stats={stats} />
        <Wal stats={stats} />
      </div>
      {stats.disk !== undefined ? <Disk disk={stats.disk} /> : null}
    </>
  );
}
