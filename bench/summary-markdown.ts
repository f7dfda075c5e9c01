// A run's figures as a Markdown page, written beside its results.jsonl
// (bench/results/<suite>-<timestamp>/summary.md) for people and for pasting into
// bench/README.md: the meta line's facts as a list, then one table row a figure, then the
// run's SVG charts (written beside it by bench/report.ts saveCharts) as images.
import { writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Figure } from './report.ts';

const figureKeys: ReadonlySet<string> = new Set(['suite', 'name', 'value', 'unit']);

function cell(text: string): string {
  return text.replace(/\|/g, '\\|');
}

export function toMarkdown(suite: string, startedAt: Date, figures: readonly Figure[], charts: readonly string[] = []): string {
  const lines = [`# \`${suite}\` — ${startedAt.toISOString()}`, ''];
  const rows: string[] = [];
  for (const figure of figures) {
    const facts = Object.entries(figure).filter(([key]) => !figureKeys.has(key));
    if (facts.length > 0) {
      for (const [key, fact] of facts) lines.push(`- ${key}: ${cell(String(fact))}`);
      lines.push('');
      continue;
    }
    rows.push(`| \`${figure.name}\` | ${figure.value.toLocaleString('en-US', { maximumFractionDigits: 3 })} | ${cell(figure.unit)} |`);
  }
  lines.push('| figure | value | unit |', '|---|---:|---|', ...rows);
  if (charts.length > 0) lines.push('', ...charts.map((file) => `![${file}](${file})`));
  return lines.join('\n') + '\n';
}

/** Writes summary.md beside `resultsPath` (the results.jsonl of the run) and returns its path. */
export async function saveMarkdownSummary(resultsPath: string, suite: string, startedAt: Date, figures: readonly Figure[], charts: readonly string[] = []): Promise<string> {
  const path = join(dirname(resultsPath), 'summary.md');
  await writeFile(path, toMarkdown(suite, startedAt, figures, charts));
  return path;
}
