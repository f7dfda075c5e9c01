// The shape of a figure and its JSON line, shared by `fermata bench` (cli/bench.ts) and the
// benchmark suites (bench/report.ts prints, stores and charts them). Plain functions over plain
// objects, used on the caller's main thread.
//
//   {"suite":"wal","name":"wal.append128.per_s","value":123,"unit":"1/s"}
//
// Every figure has exactly these four keys, in this order. The one exception is a suite's
// `<suite>.meta` line (unit "info", value 0), which carries facts about the machine after them.

export interface Figure {
  readonly suite: string;
  readonly name: string;
  readonly value: number;
  readonly unit: string;
}

export type Fact = string | number | boolean;

/** The four keys every figure has; anything else on a line is a fact of a meta line. */
export const figureKeys: ReadonlySet<string> = new Set(['suite', 'name', 'value', 'unit']);

export function metaLine(suite: string, facts: Readonly<Record<string, Fact>>): Figure {
  return { suite, name: `${suite}.meta`, value: 0, unit: 'info', ...facts };
}

export function roundTo(value: number, decimals: number): number {
  const scale = 10 ** decimals;
  return Math.round(value * scale) / scale;
}

export function toJsonLines(figures: readonly Figure[]): string {
  return figures.map((figure) => JSON.stringify(figure) + '\n').join('');
}
