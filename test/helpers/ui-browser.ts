// What the dashboard's browser tests (test/integration/ui-*.test.ts) and the `ui` bench share:
// the page built from the sources as they are (ui/build.js), Debian's headless Chromium driven
// by playwright-core, the page's problems (uncaught errors, Content-Security-Policy violations,
// failed requests other than the expected ones), axe-core's WCAG A/AA check, and the keyboard's
// path through the page. The caller closes the browser.
import { mkdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { type Browser, chromium, type Page } from 'playwright-core';
import { buildUi } from '../../ui/build.js';

export const screenshotDir = fileURLToPath(new URL('../output/ui/', import.meta.url));
const axeSource = readFileSync(fileURLToPath(new URL('../../node_modules/axe-core/axe.min.js', import.meta.url)), 'utf8');

export const viewports = {
  desktop: { width: 1280, height: 800 },
  phone: { width: 390, height: 844 },
} as const;

/** Builds dist/ui/ from ui/ as it is now, so the page under test is never an older build. */
export async function buildDashboard(): Promise<void> {
  await buildUi(esbuild);
  mkdirSync(screenshotDir, { recursive: true });
}

export async function launchChromium(executablePath: string): Promise<Browser> {
  return chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-gpu'], timeout: 30_000 });
}

/** Collects what the page did wrong: uncaught errors, CSP violations, console errors not matching `expected`. */
export function watchProblems(page: Page, expected: RegExp[] = []): string[] {
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`uncaught: ${err.message}`));
  page.on('console', (message) => {
    if (message.type() !== 'error') return;
    const text = `${message.text()} ${message.location().url}`;
    if (!expected.some((pattern) => pattern.test(text))) problems.push(`console: ${text}`);
  });
  return problems;
}

/** axe-core's violations of the WCAG 2 A and AA rules on the page as it is now: "rule: target" lines. */
export async function axeViolations(page: Page): Promise<string[]> {
  // Evaluated over the DevTools protocol, which the page's CSP does not govern (an injected <script> it would refuse).
  const violations = await page.evaluate(`(async () => {
    if (typeof window.axe === 'undefined') { ${axeSource} }
    const result = await window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return result.violations.map((v) => v.id + ': ' + v.nodes.map((n) => n.target.join(' ')).join(', '));
  })()`);
  return violations as string[];
}

/**
 * Tabs through the page from its start until the focus comes round again (or `limit` presses);
 * answers each focused element's description ("button:Pause billing", "input:lookup").
 */
export async function tabThrough(page: Page, limit = 200): Promise<string[]> {
  await page.evaluate('document.activeElement?.blur()');
  const seen: string[] = [];
  for (let i = 0; i < limit; i++) {
    await page.keyboard.press('Tab');
    // Past the last element the focus leaves the page (null here) and comes back at the first.
    const focused = await page.evaluate<string | null>(`(() => {
      const element = document.activeElement;
      if (element === null || element === document.body) return null;
      return element.tagName.toLowerCase() + ':' + (element.getAttribute('aria-label') ?? element.getAttribute('name') ?? element.textContent?.trim() ?? '');
    })()`);
    // A date input takes one Tab per part (day, month, year…): the same element again is not the round's end.
    if (focused === null || focused === seen[seen.length - 1]) continue;
    if (seen.includes(focused)) break;
    seen.push(focused);
  }
  return seen;
}

/** Every element the keyboard should reach in `selector`: buttons, inputs and scrolled regions, described as tabThrough does. */
export async function actionsIn(page: Page, selector: string): Promise<string[]> {
  return page.$$eval(`${selector} button, ${selector} input, ${selector} [tabindex="0"]`, (elements) =>
    elements
      .filter((element) => !element.hasAttribute('disabled'))
      .map((element) => `${element.tagName.toLowerCase()}:${element.getAttribute('aria-label') ?? element.getAttribute('name') ?? element.textContent?.trim() ?? ''}`),
  );
}
