// The dashboard (GET /ui) in Debian's headless Chromium, driven by playwright-core, against one
// real `fermata serve --clock manual` whose timers stand still in several states (pending,
// retrying, delivered, dead, in a paused queue) because its clock moves only when the test
// moves it: the page's numbers equal the API's (a queue's limits too); pause, resume, purge,
// redrive, reschedule and cancel done on the page change the service; every action is reached
// by the keyboard; axe-core
// finds no WCAG A/AA violation; the page raises no error and breaks no rule of its
// Content-Security-Policy. Screenshots of each panel at 1280×800 and 390×844 are written to
// test/output/ui/. Skips (fails under CI) without chromium.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { type Service, startService } from '../helpers/service.ts';
import { type Sink, startH1Sink } from '../helpers/sinks.ts';
import { testScratch } from '../helpers/scratch.ts';
import { waitFor } from '../helpers/chromium.ts';
import { skipUnlessTool, toolPath } from '../helpers/tools.ts';
import { actionsIn, axeViolations, buildDashboard, launchChromium, screenshotDir, tabThrough, viewports, watchProblems } from '../helpers/ui-browser.ts';

const noChromium = skipUnlessTool('chromium');
const { children, tempDir } = testScratch('fermata-ui');
const numbers = new Intl.NumberFormat('en-US');

let service: Service;
let sink: Sink;
let browser: Browser;
let page: Page;
let problems: string[] = [];
const ids: Record<'dead' | 'dead2' | 'delivered' | 'retrying' | 'pending', string> = { dead: '', dead2: '', delivered: '', retrying: '', pending: '' };

async function apiCall<T>(method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(`${service.url}${path}`, { method, ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }) });
  assert.ok(response.ok, `${method} ${path}: ${response.status} ${await response.clone().text()}`);
  return (await response.json()) as T;
}

async function addTimer(fields: Record<string, unknown>): Promise<string> {
  return (await apiCall<{ id: string }>('POST', '/v1/timers', fields)).id;
}

async function showPanel(name: string): Promise<void> {
  await page.click(`nav [data-tab=${name}]`);
  await page.waitForSelector(`main[data-panel=${name}]`);
}

/** Waits until the element `selector` shows `text`. */
async function shown(selector: string, text: string): Promise<void> {
  // A selector, not a function polled in the page: playwright would evaluate that with eval, which the page's CSP refuses.
  await page.waitForSelector(`${selector}:text-is(${JSON.stringify(text)})`, { timeout: 15_000 });
}

async function screenshots(name: string): Promise<void> {
  for (const [size, viewport] of Object.entries(viewports)) {
    await page.setViewportSize(viewport);
    await page.screenshot({ path: join(screenshotDir, `${name}-${size}.png`), fullPage: true });
  }
  await page.setViewportSize(viewports.desktop);
}

before(async () => {
  if (noChromium !== false) return;
  await buildDashboard();
  sink = await startH1Sink((path) => ({ status: path === '/fail' ? 500 : 200 }));
  service = await startService(tempDir('data'), (child) => children.add(child), { args: ['--clock', 'manual'] });
  await apiCall('PUT', '/v1/queues/billing', { max_attempts: 1, retention_ms: 3_600_000, dead_retention_ms: 2 * 86_400_000, max_pending: 10_000 });
  ids.dead = await addTimer({ delay_ms: 1_000, target: `${sink.url}/fail`, queue: 'billing', payload: 'dies' });
  ids.dead2 = await addTimer({ delay_ms: 1_000, target: `${sink.url}/fail`, queue: 'billing', payload: 'dies too' });
  ids.delivered = await addTimer({ delay_ms: 1_000, target: `${sink.url}/ok`, payload: 'arrives' });
  ids.retrying = await addTimer({ delay_ms: 1_000, target: `${sink.url}/fail`, payload: 'retries' });
  ids.pending = await addTimer({ delay_ms: 3_600_000, target: `${sink.url}/ok`, key: 'order-42', payload: 'waits' });
  for (let i = 0; i < 3; i++) await addTimer({ delay_ms: 7_200_000, target: `${sink.url}/ok`, queue: 'reports', payload: 'later' });
  // Enough waiting timers that the counts need a thousands separator.
  const bulk = Array.from({ length: 1_200 }, () => JSON.stringify({ delay_ms: 10 * 86_400_000, target: `${sink.url}/ok`, queue: 'bulk', payload: 'b' })).join('\n');
  const batch = await fetch(`${service.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: bulk });
  assert.equal(batch.status, 201);
  await apiCall('PUT', '/v1/schedules/nightly', { cron: '0 3 * * *', time_zone: 'Europe/Paris', target: `${sink.url}/ok` });
  await apiCall('POST', '/v1/clock', { advance_ms: 2_000 });
  // The clock stands still from here: the retrying timer's next attempt is a second away in its time.
  await waitFor('one timer delivered, two dead', async () => {
    const stats = await apiCall<{ delivered: number; dead: number; in_flight: number }>('GET', '/v1/stats');
    return stats.delivered === 1 && stats.dead === 2 && stats.in_flight === 0;
  });
  browser = await launchChromium(toolPath('chromium') as string);
  page = await browser.newPage({ viewport: viewports.desktop, locale: 'en-US', timezoneId: 'Europe/Paris' });
  problems = watchProblems(page);
  await page.goto(`${service.url}/ui`);
});

after(async () => {
  await browser?.close();
  await sink?.close();
});

test('the overview shows the numbers GET /v1/stats, /v1/stats/due-histogram and /v1/stats/series answer, live', { skip: noChromium }, async () => {
  // The counters come on the event stream (GET /v1/events), read with fetch().
  await page.waitForSelector('[data-connection=streaming]');
  const stats = await apiCall<Record<string, number>>('GET', '/v1/stats');
  assert.ok((stats.pending as number) > 1_200, 'the bulk timers are pending');
  for (const name of ['pending', 'resident', 'spilled', 'in_flight', 'delivered', 'dead']) {
    const shown = await page.textContent(`[data-figure=${name}] dd`);
    assert.equal(shown, numbers.format(stats[name] as number), `${name} on the page`);
  }
  // The last 15 minutes' totals are the sums of GET /v1/stats/series's samples (the service is quiet: they stay).
  const series = await apiCall<Record<'adds' | 'deliveries' | 'failures', number[]>>('GET', '/v1/stats/series');
  const total = (column: number[]): string => numbers.format(column.reduce((sum, value) => sum + value, 0));
  assert.equal(total(series.failures), '3', 'the dead timers\' attempts and the retrying one\'s first');
  await shown('[data-figure=added_15m] dd', total(series.adds));
  await shown('[data-figure=delivered_15m] dd', total(series.deliveries));
  await shown('[data-figure=failed_15m] dd', total(series.failures));
  const due = await apiCall<{ buckets: { name: string; count: number }[] }>('GET', '/v1/stats/due-histogram');
  assert.deepEqual(due.buckets.map((bucket) => bucket.name), ['minute', 'hour', 'day', 'month', 'beyond']);
  for (const bucket of due.buckets) await shown(`[data-figure=due_${bucket.name}] dd`, numbers.format(bucket.count));
  assert.equal(await page.textContent('[data-figure=due_month] dd'), '1,200', 'the bulk timers, with a thousands separator');
  assert.equal(await page.locator('.chart canvas').count(), 3, 'the due histogram, rates and lateness charts are drawn');
  // The log's last durable write and the data directory's disk, as GET /v1/stats gives them.
  assert.notEqual(await page.textContent('[data-figure=wal_last_sync] dd'), 'none since the start', 'timers were added: the log wrote');
  await page.waitForSelector('[data-figure=disk_data] dd:text-matches("^[0-9.,]+ (B|KiB|MiB|GiB)$")');
  assert.match((await page.textContent('[data-figure=disk_free] dd')) ?? '', /^[0-9.,]+ (B|KiB|MiB|GiB|TiB)$/);
  assert.ok((await page.textContent('[data-figure=disk_free_min] dd')) !== null, 'the free-space minimum is shown');
  // A change in the service reaches the page without a reload.
  await addTimer({ delay_ms: 3_600_000, target: `${sink.url}/ok`, payload: 'one more' });
  await shown('[data-figure=pending] dd', numbers.format((stats.pending as number) + 1));
  await screenshots('overview');
});

test('queues: the page shows each queue, and pause, resume and purge from it change the service', { skip: noChromium }, async () => {
  await showPanel('queues');
  const row = 'tr[data-queue=billing]';
  await page.waitForSelector(row);
  assert.equal(await page.textContent(`${row} [data-field=paused]`), 'running');
  const queues = await apiCall<{ queues: { name: string; pending: number; in_flight: number; delivered_per_s: number }[] }>('GET', '/v1/queues');
  for (const queue of queues.queues) {
    const cells = `tr[data-queue=${queue.name}]`;
    assert.equal(await page.textContent(`${cells} [data-field=pending]`), numbers.format(queue.pending), `${queue.name}'s pending`);
    assert.equal(await page.textContent(`${cells} [data-field=in_flight]`), numbers.format(queue.in_flight), `${queue.name}'s in flight`);
  }
  assert.equal(await page.textContent('tr[data-queue=bulk] [data-field=pending]'), '1,200');
  // Each queue's limits: its own, or the service's where it sets none.
  const limits = async (queue: string): Promise<Array<string | null>> => Promise.all(['max_pending', 'retention_ms', 'dead_retention_ms'].map((field) => page.textContent(`tr[data-queue=${queue}] [data-field=${field}]`)));
  assert.deepEqual(await limits('billing'), ['at most 10,000 pending', 'done kept 1 h', 'dead kept 2 d']);
  assert.deepEqual(await limits('bulk'), ['no pending cap', 'done kept as the service', 'dead kept as the service']);
  await screenshots('queues');

  await page.click(`${row} button:text("Pause billing")`);
  await page.waitForSelector(`${row} button:text("Resume billing")`);
  assert.equal((await apiCall<{ paused: boolean }>('GET', '/v1/queues/billing')).paused, true);
  assert.equal(await page.textContent(`${row} [data-field=paused]`), 'paused');
  await page.click(`${row} button:text("Resume billing")`);
  await page.waitForSelector(`${row} button:text("Pause billing")`);
  assert.equal((await apiCall<{ paused: boolean }>('GET', '/v1/queues/billing')).paused, false);

  const reports = 'tr[data-queue=reports]';
  await page.click(`${reports} button:text("Purge reports…")`);
  const confirm = await page.waitForSelector(`${reports} .confirm`);
  const question = await confirm.textContent();
  assert.match(question ?? '', /Cancel the 3 timers waiting in reports/);
  await page.click(`${reports} .confirm button:text("Purge 3 timers")`);
  await page.waitForSelector(`${reports} [role=status]`);
  assert.equal(await page.textContent(`${reports} [role=status]`), '3 cancelled');
  const left = await apiCall<{ timers: unknown[] }>('GET', '/v1/timers?queue=reports&state=pending');
  assert.equal(left.timers.length, 0, 'the purge cancelled the queue\'s timers');
});

test('dead letters: the page lists the dead timers and redrives one, then every one its filter matches', { skip: noChromium }, async () => {
  await showPanel('dead');
  const row = `tr[data-timer="${ids.dead}"]`;
  await page.waitForSelector(row);
  const cells = await page.$$eval(`${row} td`, (tds) => tds.map((td) => td.textContent ?? ''));
  assert.deepEqual(cells.slice(0, 3), ['billing', '1', '500']);
  assert.match(cells[3] ?? '', /attempts exhausted/);
  await screenshots('dead');
  // Held by a paused queue, the redriven timer stays pending instead of dying again at once.
  await apiCall('POST', '/v1/queues/billing/pause');
  await page.click(`${row} button[aria-label="Redrive ${ids.dead}"]`);
  await page.waitForSelector(row, { state: 'detached' });
  const timer = await apiCall<{ state: string; attempts: number }>('GET', `/v1/timers/${ids.dead}`);
  assert.deepEqual([timer.state, timer.attempts], ['pending', 0]);
  assert.deepEqual((await apiCall<{ dead: { id: string }[] }>('GET', '/v1/dead')).dead.map((dead) => dead.id), [ids.dead2]);

  await page.fill('input[name=queue]', 'billing');
  await page.click('button:text("Filter")');
  await page.click('button:text("Redrive every dead timer of queue billing")');
  await page.waitForSelector('main [role=status]:text-is("1 redriven")');
  assert.equal((await apiCall<{ dead: unknown[] }>('GET', '/v1/dead')).dead.length, 0);
  assert.equal((await apiCall<{ state: string }>('GET', `/v1/timers/${ids.dead2}`)).state, 'pending');
});

test('timer lookup by key and id: its fields; reschedule and cancel from the page', { skip: noChromium }, async () => {
  await showPanel('timer');
  await page.fill('input[name=lookup]', 'order-42');
  await page.press('input[name=lookup]', 'Enter');
  await page.waitForSelector(`dl[data-timer="${ids.pending}"]`);
  const view = await apiCall<{ state: string; revision: number; fire_at: string; attempts: number }>('GET', `/v1/timers/${ids.pending}`);
  assert.equal(await page.textContent('[data-field=state]'), view.state);
  assert.equal(await page.textContent('[data-field=revision]'), String(view.revision));
  assert.equal(await page.textContent('[data-field=attempts]'), String(view.attempts));
  assert.equal(await page.getAttribute('[data-field=fire_at] time', 'title'), `${view.fire_at.replace('.000Z', 'Z')} (UTC)`);
  await screenshots('timer');

  // The datetime-local input is in the browser's zone (Europe/Paris here).
  await page.fill('input[name=fire_at]', '2030-01-02T10:00:00');
  await page.click('button:text("Reschedule")');
  await shown('[data-field=revision]', '2');
  const moved = await apiCall<{ fire_at: string; revision: number }>('GET', `/v1/timers/${ids.pending}`);
  assert.deepEqual([moved.fire_at, moved.revision], ['2030-01-02T09:00:00.000Z', 2]);

  await page.fill('input[name=lookup]', ids.retrying);
  await page.press('input[name=lookup]', 'Enter');
  await page.waitForSelector(`dl[data-timer="${ids.retrying}"]`);
  assert.equal(await page.textContent('[data-field=state]'), 'retrying');
  // Watched on the event stream: a change made elsewhere shows without a click.
  await apiCall('PATCH', `/v1/timers/${ids.retrying}`, { fire_at: '2031-01-01T00:00:00Z' });
  await shown('[data-field=revision]', '2');
  await page.click('button:text("Cancel timer")');
  await shown('[data-field=state]', 'cancelled');
  assert.equal((await apiCall<{ state: string }>('GET', `/v1/timers/${ids.retrying}`)).state, 'cancelled');
});

test('schedules: the page lists each schedule with its next occurrence', { skip: noChromium }, async () => {
  await showPanel('schedules');
  await page.waitForSelector('tr[data-schedule=nightly]');
  const schedule = await apiCall<{ next: { fire_at: string }[] }>('GET', '/v1/schedules/nightly');
  assert.equal(await page.getAttribute('tr[data-schedule=nightly] time', 'datetime'), schedule.next[0]?.fire_at);
  await screenshots('schedules');
  await page.click('tr[data-schedule=nightly] button:text("Pause nightly")');
  await page.waitForSelector('tr[data-schedule=nightly] button:text("Resume nightly")');
  assert.equal((await apiCall<{ paused: boolean }>('GET', '/v1/schedules/nightly')).paused, true);
});

test('every action of every panel is reached with the Tab key', { skip: noChromium }, async () => {
  for (const panel of ['overview', 'queues', 'dead', 'timer', 'schedules']) {
    await showPanel(panel);
    if (panel === 'timer') {
      await page.fill('input[name=lookup]', 'order-42');
      await page.press('input[name=lookup]', 'Enter');
      await page.waitForSelector('button:text("Reschedule")');
    }
    if (panel === 'queues') await page.waitForSelector('tr[data-queue=billing]');
    const wanted = [...(await actionsIn(page, 'nav')), ...(await actionsIn(page, 'main'))];
    const reached = await tabThrough(page);
    for (const action of wanted) assert.ok(reached.includes(action), `${panel}: Tab never reaches ${action} (reached ${reached.join(', ')})`);
  }
});

test('axe-core: no WCAG A/AA violations on any panel, at 1280×800 and 390×844', { skip: noChromium }, async () => {
  for (const panel of ['overview', 'queues', 'dead', 'timer', 'schedules']) {
    await showPanel(panel);
    await page.waitForTimeout(300);
    for (const viewport of Object.values(viewports)) {
      await page.setViewportSize(viewport);
      assert.deepEqual(await axeViolations(page), [], `${panel} at ${viewport.width}×${viewport.height}`);
    }
    await page.setViewportSize(viewports.desktop);
  }
});

test('the page raised no error and broke no rule of its Content-Security-Policy', { skip: noChromium }, () => {
  assert.deepEqual(problems, []);
});
