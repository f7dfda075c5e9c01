// The overview's histogram of waiting timers (pending, retrying, held; in memory and on disk) by
// when each is next due, in the service's five disjoint buckets (GET /v1/stats/due-histogram):
// bars, and each bucket's count as text.
import { api } from '../api.ts';
import { Chart } from '../chart.tsx';
import { ErrorNote, Figure, Section, useLoad } from '../common.tsx';
import { count } from '../format.ts';

const refreshMs = 2_000;

interface DueHistogram {
  readonly buckets: readonly { readonly name: string; readonly count: number }[];
  readonly total: number;
}

const bucketLabels: Record<string, string> = { minute: 'Next minute', hour: 'Next hour', day: 'Next day', month: 'Next 30 days', beyond: 'Beyond' };
/** Short enough for a phone's axis. */
const axisLabels: Record<string, string> = { minute: '< 1 min', hour: '< 1 h', day: '< 1 day', month: '< 30 days', beyond: 'later' };

export function DueTimes() {
  const histogram = useLoad(() => api<DueHistogram>('GET', '/v1/stats/due-histogram'), [], refreshMs);
  const data = histogram.data;
  return (
    <Section id="due" title="Waiting timers by when they are due">
      <ErrorNote error={histogram.error} />
      {data !== undefined ? (
        <>
          <Chart
            label="Waiting timers by when they are next due"
            series={[{ label: 'Timers', tone: 'blue' }]}
            categories={data.buckets.map((bucket) => axisLabels[bucket.name] ?? bucket.name)}
            data={[data.buckets.map((_bucket, i) => i), data.buckets.map((bucket) => bucket.count)]}
            unit={count}
          />
          <dl class="figures">
            {data.buckets.map((bucket) => (
              <Figure key={bucket.name} name={`due_${bucket.name}`} label={bucketLabels[bucket.name] ?? bucket.name} value={count(bucket.count)} />
            ))}
          </dl>
        </>
      ) : null}
    </Section>
  );
}
