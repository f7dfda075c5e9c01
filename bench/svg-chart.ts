// Hand-written SVG charts for bench/results/<suite>-<timestamp>/: a line chart (a percentile
// distribution or a rate over time) and a horizontal bar chart (bytes per timer). Pure functions
// from data to a self-contained SVG document string; bench/run.ts writes them. Every piece of
// text is XML-escaped, so names from figures cannot break the document.

export interface LineChart {
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly points: readonly (readonly [number, number])[];
  /** Percentile axes crowd at the tail; 'tail' spaces x by −log10(100 − x) so p99.9 is readable. */
  readonly xScale: 'linear' | 'tail';
}

export interface BarChart {
  readonly title: string;
  readonly unit: string;
  readonly bars: readonly { readonly label: string; readonly value: number }[];
}

const width = 720;
const lineHeight = 420;
const margin = { top: 40, right: 30, bottom: 60, left: 80 };
const tickCount = 5;
/** The 'tail' scale caps at p99.999 so 100 (log of zero) still lands on the axis. */
const tailCapPercent = 0.001;

export function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** A round number for a tick label: at most 4 significant digits, no exponent. */
export function tickLabel(value: number): string {
  return Number(value.toPrecision(4)).toLocaleString('en-US', { maximumFractionDigits: 4 });
}

/** `count` + 1 evenly spaced ticks from 0 to a round top at or above `max` (1, 2 or 5 × 10^n). */
export function niceTicks(max: number, count: number): number[] {
  const top = max > 0 ? max : 1;
  const rawStep = top / count;
  const magnitude = 10 ** Math.floor(Math.log10(rawStep));
  const step = ([1, 2, 5, 10].find((factor) => factor * magnitude >= rawStep) ?? 10) * magnitude;
  // toPrecision drops the float noise of i × step (3 × 0.2 = 0.6000000000000001).
  return Array.from({ length: Math.ceil(top / step - 1e-9) + 1 }, (_, i) => Number((i * step).toPrecision(12)));
}

function tailX(percentile: number): number {
  return -Math.log10(Math.max(tailCapPercent, 100 - percentile));
}

function document(height: number, title: string, body: string[]): string {
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">${escapeXml(title)}</text>`,
    ...body,
    `</svg>`,
    '',
  ].join('\n');
}

export function lineChartSvg(chart: LineChart): string {
  const plotW = width - margin.left - margin.right;
  const plotH = lineHeight - margin.top - margin.bottom;
  const toX = chart.xScale === 'tail' ? tailX : (x: number): number => x;
  const xs = chart.points.map(([x]) => toX(x));
  const xMin = Math.min(...xs, 0);
  const xMax = Math.max(...xs, xMin + 1);
  const yTicks = niceTicks(Math.max(...chart.points.map(([, y]) => y), 0), tickCount);
  const yTop = yTicks[yTicks.length - 1] as number;
  const px = (x: number): number => margin.left + ((toX(x) - xMin) / (xMax - xMin)) * plotW;
  const py = (y: number): number => margin.top + plotH - (y / yTop) * plotH;
  const body: string[] = [];
  for (const tick of yTicks) {
    const y = py(tick).toFixed(1);
    body.push(`<line x1="${margin.left}" y1="${y}" x2="${margin.left + plotW}" y2="${y}" stroke="#ddd"/>`);
    body.push(`<text x="${margin.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${escapeXml(tickLabel(tick))}</text>`);
  }
  const xTicks = chart.xScale === 'tail' ? chart.points.map(([x]) => x).filter((x) => [0, 50, 90, 99, 99.9, 99.99, 100].includes(x)) : niceTicks(Math.max(...xs), tickCount);
  for (const tick of xTicks) {
    const x = px(tick).toFixed(1);
    body.push(`<line x1="${x}" y1="${margin.top + plotH}" x2="${x}" y2="${margin.top + plotH + 5}" stroke="black"/>`);
    body.push(`<text x="${x}" y="${margin.top + plotH + 18}" text-anchor="middle">${escapeXml(tickLabel(tick))}</text>`);
  }
  body.push(`<line x1="${margin.left}" y1="${margin.top}" x2="${margin.left}" y2="${margin.top + plotH}" stroke="black"/>`);
  body.push(`<line x1="${margin.left}" y1="${margin.top + plotH}" x2="${margin.left + plotW}" y2="${margin.top + plotH}" stroke="black"/>`);
  const path = chart.points.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
  body.push(`<polyline points="${path}" fill="none" stroke="#1f77b4" stroke-width="2"/>`);
  for (const [x, y] of chart.points) body.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="#1f77b4"/>`);
  body.push(`<text x="${margin.left + plotW / 2}" y="${lineHeight - 14}" text-anchor="middle">${escapeXml(chart.xLabel)}</text>`);
  body.push(`<text x="18" y="${margin.top + plotH / 2}" text-anchor="middle" transform="rotate(-90 18 ${margin.top + plotH / 2})">${escapeXml(chart.yLabel)}</text>`);
  return document(lineHeight, chart.title, body);
}

const barHeight = 22;
const barGap = 8;
const labelWidth = 300;

export function barChartSvg(chart: BarChart): string {
  const plotW = width - labelWidth - margin.right - 60;
  const height = margin.top + chart.bars.length * (barHeight + barGap) + 50;
  const ticks = niceTicks(Math.max(...chart.bars.map((bar) => bar.value), 0), tickCount);
  const top = ticks[ticks.length - 1] as number;
  const axisY = margin.top + chart.bars.length * (barHeight + barGap);
  const body: string[] = [];
  for (const tick of ticks) {
    const x = (labelWidth + (tick / top) * plotW).toFixed(1);
    body.push(`<line x1="${x}" y1="${margin.top}" x2="${x}" y2="${axisY}" stroke="#ddd"/>`);
    body.push(`<text x="${x}" y="${axisY + 16}" text-anchor="middle">${escapeXml(tickLabel(tick))}</text>`);
  }
  chart.bars.forEach((bar, i) => {
    const y = margin.top + i * (barHeight + barGap);
    const w = ((Math.max(0, bar.value) / top) * plotW).toFixed(1);
    body.push(`<text x="${labelWidth - 8}" y="${y + barHeight / 2}" text-anchor="end" dominant-baseline="middle">${escapeXml(bar.label)}</text>`);
    body.push(`<rect x="${labelWidth}" y="${y}" width="${w}" height="${barHeight}" fill="#2ca02c"/>`);
    body.push(`<text x="${labelWidth + Number(w) + 4}" y="${y + barHeight / 2}" dominant-baseline="middle">${escapeXml(tickLabel(bar.value))}</text>`);
  });
  body.push(`<line x1="${labelWidth}" y1="${margin.top}" x2="${labelWidth}" y2="${axisY}" stroke="black"/>`);
  body.push(`<text x="${labelWidth + plotW / 2}" y="${height - 10}" text-anchor="middle">${escapeXml(chart.unit)}</text>`);
  return document(height, chart.title, body);
}
