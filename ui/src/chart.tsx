// A uPlot chart of a few series over time (or over buckets, as bars), sized to its box and
// redrawn when its data changes, with a legend of its series' colours below it. The canvas is an image to assistive technology: `label` names
// it, and the panel that shows a chart writes its figures as text beside it.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

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

  useEffect(() => {
    const element = box.current;
    if (element === null) return undefined;
    const bars = categories === undefined ? undefined : uPlot.paths.bars?.({ size: [0.6, 64] });
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
    const chart = new uPlot(options, data as uPlot.AlignedData, element);
    plot.current = chart;
    const resize = new ResizeObserver(() => chart.setSize({ width: Math.max(element.clientWidth, 200), height }));
    resize.observe(element);
    return () => {
      resize.disconnect();
      chart.destroy();
      plot.current = null;
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
