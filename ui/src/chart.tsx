// A uPlot chart of a few series over time (or over buckets, as bars), sized to its box and
// redrawn when its data changes, with a legend of its series' colours below it. The canvas is an
// image to assistive technology: `label` names it, and the panel that shows a chart writes its
// figures as text beside it.
import { useEffect, useRef } from 'preact/hooks';
import type uPlot from 'uplot';

/** uPlot, loaded at the first chart: a chunk of its own, so the first numbers need not wait for it. */
let library: Promise<typeof uPlot> | undefined;
const loadUPlot = (): Promise<typeof uPlot> => (library ??= import('uplot').then((module) => module.default));

/** The series' colours, the same in the canvas and in the legend's swatches (style.css: .swatch.NAME). */
const tones = { blue: '#0b5cad', green: '#17623a', red: '#a61b1b', amber: '#b45309' } as const;

export interface ChartSeries {
  readonly label: string;
  readonly tone: keyof typeof tones;
}

export interface ChartProps {
  readonly label: string;
  readonly series: readonly ChartSeries[];
  /** x values first, then one column per series (null: no value there). */
  readonly data: readonly (readonly (number | null)[])[];
  /** Formats a y value on the axis. */
  readonly unit: (value: number) => string;
  /** Bars over categories (x = 0, 1, …, named by `categories`) instead of lines over time (x = epoch seconds). */
  readonly categories?: readonly string[];
}

const height = 200;

export function Chart({ label, series, data, unit, categories }: ChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  // The data as last rendered: the chart, made once uPlot has loaded, starts from it.
  const latest = useRef(data);
  latest.current = data;

  useEffect(() => {
    const element = box.current;
    if (element === null) return undefined;
    let cleanup: (() => void) | undefined;
    let unmounted = false;
    void loadUPlot().then((UPlot) => {
      if (unmounted) return;
      const bars = categories === undefined ? undefined : UPlot.paths.bars?.({ size: [0.6, 64] });
      const options: uPlot.Options = {
        width: Math.max(element.clientWidth, 200),
        height,
        legend: { show: false },
        cursor: { show: categories === undefined, drag: { x: false, y: false } },
        scales: { x: { time: categories === undefined }, y: { range: (_self, _min, max) => [0, Math.max(1, max * 1.1)] } },
        axes: [
          categories === undefined ? {} : { values: (_self, ticks) => ticks.map((tick) => categories[tick] ?? '') },
          { values: (_self, ticks) => ticks.map(unit), size: 70 },
        ],
        series: [{}, ...series.map((one) => ({ label: one.label, stroke: tones[one.tone], width: 2, ...(bars === undefined ? {} : { paths: bars, fill: tones[one.tone] }) }))],
      };
      const chart = new UPlot(options, latest.current as uPlot.AlignedData, element);
      plot.current = chart;
      const resize = new ResizeObserver(() => chart.setSize({ width: Math.max(element.clientWidth, 200), height }));
      resize.observe(element);
      cleanup = () => {
        resize.disconnect();
        chart.destroy();
        plot.current = null;
      };
    });
    return () => {
      unmounted = true;
      cleanup?.();
    };
  }, []);

  useEffect(() => {
    plot.current?.setData(data as uPlot.AlignedData);
  }, [data]);

  return (
    <>
      <div class="chart" ref={box} role="img" aria-label={label} />
      {series.length > 1 ? (
        <ul class="legend">
          {series.map((one) => (
            <li key={one.label}>
              <span class={`swatch ${one.tone}`} aria-hidden="true" />
              {one.label}
            </li>
          ))}
        </ul>
      ) : null}
    </>
  );
}
