// The `ui` suite's page figure: `ui.first_data_ms`, from the navigation to GET /ui to the first
// numbers the dashboard shows (its "Pending" figure), in Debian's headless Chromium driven by
// playwright-core, on loopback, against one `fermata serve` with a few timers. Each load is in a
// fresh browser context, so nothing is cached: the page, its script and style sheet and the
// first API calls all cross the wire. The figure is the median of the loads (the worst in the meta facts);
// the time is taken in this process, from before the navigation to the moment playwright sees
// the figure (one DevTools round trip after it is drawn). The page is built from ui/ first
// (ui/build.js). Without chromium it returns only its meta facts, saying so.
import { spawnSync } from 'node:child_process';
import { buildDashboard, launchChromium } from '../test/helpers/ui-browser.ts';
import { startFermata } from './fermata-child.ts';
import { type Fact, type Figure, roundTo, type SuiteOptions } from './report.ts';

const loads = { quick: 3, full: 15 } as const;
const timersAdded = 100;

function chromiumPath(): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' });
  const path = found.stdout.trim();
  return found.status === 0 && path !== '' ? path : undefined;
}

/** The figures, and the facts the suite's meta line should carry. */
export async function firstDataFigures(suite: string, options: SuiteOptions): Promise<{ figures: Figure[]; facts: Record<string, Fact> }> {
  const executable = chromiumPath();
  if (executable === undefined) return { figures: [], facts: { first_data: 'skipped: no chromium (Debian package chromium)' } };
  await buildDashboard();
  const service = await startFermata(options.baseDir, 'ui-page');
  const browser = await launchChromium(executable);
  try {
    const body = Array.from({ length: timersAdded }, (_, i) => JSON.stringify({ delay_ms: 3_600_000 + i, target: 'https://example.com/hook', payload: 'p' })).join('\n');
    const added = await fetch(`${service.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body });
    if (added.status !== 201) throw new Error(`adding the timers answered ${added.status}`);
    const times: number[] = [];
    const count = options.quick ? loads.quick : loads.full;
    for (let i = 0; i < count; i++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      const started = performance.now();
      await page.goto(`${service.url}/ui`, { waitUntil: 'commit' });
      await page.waitForSelector(`[data-figure=pending] dd:text-is("${timersAdded}")`, { timeout: 30_000 });
      times.push(performance.now() - started);
      await context.close();
      options.progress(`ui: load ${i + 1}/${count}: ${Math.round(times[times.length - 1] as number)} ms to the first numbers`);
    }
    times.sort((a, b) => a - b);
    const median = times[Math.floor(times.length / 2)] as number;
    return {
      figures: [{ suite, name: 'ui.first_data_ms', value: roundTo(median, 1), unit: 'ms' }],
      facts: { first_data_loads: count, first_data_worst_ms: roundTo(times[times.length - 1] as number, 1) },
    };
  } finally {
    await browser.close();
    await service.stop();
  }
}
