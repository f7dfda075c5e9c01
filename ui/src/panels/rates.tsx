// The overview's last 15 minutes (GET /v1/stats/series, a sample a second): adds, deliveries and
// failed attempts a second, and fire lateness p50/p99/max, as charts with their totals and
// extremes written beside them. The whole ring is read once, then every second only the samples
// after the last one the page has (`after_ms`), kept to the service's `samples_max`.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { Chart } from '../chart.tsx';
import { ErrorNote, Figure, Section } from '../common.tsx';
import { count, ms, perSecond } from '../format.ts';

const refreshMs = 1_000;

interface Series {
  readonly samples_max: number;
  readonly at_ms: readonly number[];
  readonly adds: readonly number[];
  readonly deliveries: readonly number[];
  readonly failures: readonly number[];
  readonly lateness_ms: { readonly p50: readonly (number | null)[]; readonly p99: readonly (number | null)[]; readonly max: readonly (number | null)[] };
}

function appended(held: Series, more: Series): Series {
  const keep = <T,>(a: readonly T[], b: readonly T[]): T[] => [...a, ...b].slice(-more.samples_max);
  return {
    samples_max: more.samples_max,
    at_ms: keep(held.at_ms, more.at_ms),
    adds: keep(held.adds, more.adds),
    deliveries: keep(held.deliveries, more.deliveries),
    failures: keep(held.failures, more.failures),
    lateness_ms: { p50: keep(held.lateness_ms.p50, more.lateness_ms.p50), p99: keep(held.lateness_ms.p99, more.lateness_ms.p99), max: keep(held.lateness_ms.max, more.lateness_ms.max) },
  };
}

function useSeries(): { series: Series | undefined; error: unknown } {
  const [series, setSeries] = useState<Series | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    let held: Series | undefined;
    let stopped = false;
    const load = async () => {
      try {
        const last = held?.at_ms[held.at_ms.length - 1];
        const answer = await api<Series>('GET', last === undefined ? '/v1/stats/series' : `/v1/stats/series?after_ms=${last}`);
        if (stopped) return;
        held = held === undefined ? answer : appended(held, answer);
        setSeries(held);
        setError(undefined);
      } catch (err) {
        setError(err);
      }
    };
    void load();
    const timer = setInterval(() => void load(), refreshMs);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, []);
  return { series, error };
}

const sum = (values: readonly number[]): number => values.reduce((total, value) => total + value, 0);
const worst = (values: readonly (number | null)[]): number | null => values.reduce<number | null>((most, value) => (value !== null && (most === null || value > most) ? value : most), null);

export function Rates() {
  const { series, error } = useSeries();
  if (series === undefined) return <ErrorNote error={error} />;
  const seconds = series.at_ms.map((at) => at / 1000);
  const latest = series.at_ms.length - 1;
  const lateMax = worst(series.lateness_ms.max);
  const lateP99 = worst(series.lateness_ms.p99);
  return (
    <div class="charts">
      <Section id="rates" title="Last 15 minutes: timers a second">
        <Chart
          label="Adds, deliveries and failed attempts a second over the last 15 minutes"
          series={[
            { label: 'Adds/s', tone: 'blue' },
            { label: 'Deliveries/s', tone: 'green' },
            { label: 'Failures/s', tone: 'red' },
          ]}
          data={[seconds, series.adds, series.deliveries, series.failures]}
          unit={perSecond}
        />
        <dl class="figures">
          <Figure name="added_15m" label="Added" value={count(sum(series.adds))} />
          <Figure name="delivered_15m" label="Delivered" value={count(sum(series.deliveries))} />
          <Figure name="failed_15m" label="Failed attempts" value={count(sum(series.failures))} />
          <Figure name="adds_now" label="Adds now" value={latest < 0 ? '–' : perSecond(series.adds[latest] ?? 0)} />
        </dl>
      </Section>
      <Section id="lateness" title="Last 15 minutes: fire lateness">
        <Chart
          label="Fire lateness p50, p99 and max over the last 15 minutes"
          series={[
            { label: 'p50', tone: 'blue' },
            { label: 'p99', tone: 'amber' },
            { label: 'max', tone: 'red' },
          ]}
          data={[seconds, series.lateness_ms.p50, series.lateness_ms.p99, series.lateness_ms.max]}
          unit={ms}
        />
        <dl class="figures">
          <Figure name="lateness_p99_15m" label="Worst p99" value={lateP99 === null ? '–' : ms(lateP99)} />
          <Figure name="lateness_max_15m" label="Worst (max)" value={lateMax === null ? '–' : ms(lateMax)} />
        </dl>
      </Section>
    </div>
  );
}
