// The dashboard on a cluster node: real `fermata serve --cluster` nodes over PostgreSQL (P = 2,
// short leases) in headless Chromium. With one node, the page reads the node's event stream; it
// shows the Cluster panel (this node, the partitions it owns, every partition's owner, as GET
// /v1/cluster answers) and the cluster's totals, and the Queues and Schedules panels over the
// cluster's queues and schedules; axe-core finds no WCAG A/AA violation; screenshots at both
// sizes. Then a second node joins and takes a partition, timers are added and delivered through
// both, and once the cluster is quiet the overview's numbers (the cluster's counts, the due
// histogram, the last 15 minutes' adds, deliveries and failures) equal what GET /v1/stats,
// /v1/stats/due-histogram and /v1/stats/series answer. Skips (fails under CI) without
// PostgreSQL or chromium.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import postgres from 'postgres';
import type { Browser } from 'playwright-core';
import { initCluster } from '../../cluster/cluster-init.ts';
import { waitFor } from '../helpers/chromium.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { type Service, startService } from '../helpers/service.ts';
import { type Sink, startH1Sink } from '../helpers/sinks.ts';
import { testScratch } from '../helpers/scratch.ts';
import { skipUnlessTool, toolPath } from '../helpers/tools.ts';
import { axeViolations, buildDashboard, launchChromium, screenshotDir, viewports, watchProblems } from '../helpers/ui-browser.ts';

const missing = skipUnlessTool('initdb') || skipUnlessTool('chromium');
const { children, tempDir } = testScratch('fermata-ui-cluster');
const partitions = 2;

interface ClusterView {
  readonly node_id: string;
  readonly owned: { partition: number; epoch: string | number; replay_records: number | null }[];
  readonly owners: { partition: number; here: boolean; address: string | null }[];
}

const secretEnv = { FERMATA_CLUSTER_SECRET: 'the-ui-cluster-secret' };
const numbers = new Intl.NumberFormat('en-US');

let server: PostgresServer | undefined;
let clusterUrl = '';
let node: Service | undefined;
let browser: Browser | undefined;
let sink: Sink | undefined;
after(async () => {
  await browser?.close();
  for (const child of children) child.kill('SIGKILL');
  await sink?.close();
  await server?.stop();
});

/** A node of the test's cluster, with its own data directory and a 1 s lease. */
async function startNode(nodeId: string): Promise<Service> {
  const dataDir = tempDir(nodeId);
  const config = join(dataDir, 'config.json');
  writeFileSync(config, JSON.stringify({ cluster: { node_id: nodeId, lease_ttl_ms: 1_000, renew_ms: 200 }, dispatch: { threads: 1 } }));
  return startService(dataDir, (child) => children.add(child), { args: ['--cluster', clusterUrl, '--config', config], env: secretEnv });
}

test('a cluster node\'s dashboard shows the cluster panel, the queues and the schedules', { skip: missing, timeout: 120_000 }, async () => {
  await buildDashboard();
  server = await startPostgres();
  clusterUrl = await server.createDatabase('ui');
  const admin = postgres(clusterUrl, { max: 1, onnotice: () => {} });
  await initCluster(admin, partitions);
  await admin.end();
  const one = (node = await startNode('node-ui'));
  let view: ClusterView | undefined;
  await waitFor('the node to own every partition', async () => {
    const answer = await fetch(`${one.url}/v1/cluster`);
    view = answer.ok ? ((await answer.json()) as ClusterView) : undefined;
    return view !== undefined && view.owned.length === partitions && view.owners.every((owner) => owner.address !== null);
  });
  const added = await fetch(`${one.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ delay_ms: 3_600_000, target: 'http://127.0.0.1:9/x', payload: 'p' }) });
  assert.equal(added.status, 201);

  browser = await launchChromium(toolPath('chromium') as string);
  {
    const page = await browser.newPage({ viewport: viewports.desktop, locale: 'en-US' });
    const problems = watchProblems(page);
    await page.goto(`${one.url}/ui`);
    await page.waitForSelector('[data-figure=pending] dd:text-is("1")');
    // The node's event stream carries the counters.
    await page.waitForSelector('[data-connection=streaming]');
    const tabs = await page.$$eval('nav button', (buttons) => buttons.map((button) => button.getAttribute('data-tab')));
    assert.deepEqual(tabs, ['overview', 'queues', 'dead', 'timer', 'schedules', 'cluster']);
    const configured = await fetch(`${one.url}/v1/queues/billing`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ max_attempts: 3 }) });
    assert.equal(configured.status, 200, await configured.text());
    await page.click('nav [data-tab=queues]');
    await page.waitForSelector('tr[data-queue=billing]');
    const scheduled = await fetch(`${one.url}/v1/schedules/hourly`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ every_ms: 3_600_000, target: 'http://127.0.0.1:9/x' }) });
    assert.equal(scheduled.status, 200);
    await page.click('nav [data-tab=schedules]');
    await page.waitForSelector('tr[data-schedule=hourly]');

    await page.click('nav [data-tab=cluster]');
    await page.waitForSelector('[data-figure=node_id] dd:text-is("node-ui")');
    assert.equal(await page.textContent('[data-figure=partitions] dd'), String(partitions));
    assert.equal(await page.textContent('[data-figure=owned] dd'), String(partitions));
    // The rows as GET /v1/cluster answers now (the service is quiet: what it says stays).
    const now = (await (await fetch(`${one.url}/v1/cluster`)).json()) as ClusterView;
    const expected = now.owners.map((owner) => {
      const owned = now.owned.find((one) => one.partition === owner.partition);
      return [String(owner.partition), `this node (${owner.address})`, String(owned?.epoch), String(owned?.replay_records)];
    });
    assert.ok(now.owned.some((owned) => (owned.replay_records ?? 0) > 0), 'the adds wait for a checkpoint');
    await waitFor('the partitions table to show GET /v1/cluster', async () => {
      const rows = await page.$$eval('main tbody tr', (trs) => trs.map((tr) => [...tr.children].map((cell) => cell.textContent ?? '')));
      return JSON.stringify(rows) === JSON.stringify(expected);
    });
    for (const [size, viewport] of Object.entries(viewports)) {
      await page.setViewportSize(viewport);
      assert.deepEqual(await axeViolations(page), [], `cluster panel at ${size}`);
      await page.screenshot({ path: join(screenshotDir, `cluster-${size}.png`), fullPage: true });
    }
    assert.deepEqual(problems, []);
    await page.close();
  }
});

test('with two nodes, the overview\'s numbers are the cluster\'s: counts, due times and the last 15 minutes, as the API answers them', { skip: missing, timeout: 120_000 }, async () => {
  assert.ok(node !== undefined && browser !== undefined, 'the test before started the first node and the browser');
  const one = node;
  sink = await startH1Sink();
  const two = await startNode('node-ui-2');
  await waitFor('the second node to take a partition by handover', async () => {
    const views = await Promise.all([one, two].map(async (each) => (await (await fetch(`${each.url}/v1/cluster`)).json()) as ClusterView));
    // Both nodes name the same owner for each partition (a node's table of the others' is read every 200 ms).
    const agree = views[0]?.owners.every((owner, partition) => owner.address !== null && owner.address === views[1]?.owners[partition]?.address);
    return agree === true && views.every((each) => each.owned.length === 1);
  });
  // Timers through both nodes, into both partitions: some delivered, the rest waiting at several distances.
  const specs = [
    ...Array.from({ length: 6 }, (_, i) => ({ delay_ms: 0, target: `${sink?.url}/ok`, key: `now-${i}` })),
    ...Array.from({ length: 3 }, (_, i) => ({ delay_ms: 1_800_000, target: `${sink?.url}/ok`, key: `hour-${i}` })),
    ...Array.from({ length: 2 }, (_, i) => ({ delay_ms: 10 * 86_400_000, target: `${sink?.url}/ok`, key: `month-${i}` })),
  ];
  for (const [i, spec] of specs.entries()) {
    const added = await fetch(`${(i % 2 === 0 ? one : two).url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...spec, payload: 'p' }) });
    assert.equal(added.status, 201, await added.text());
  }
  interface Totals {
    readonly pending: number;
    readonly delivered: number;
    readonly dead: number;
    readonly in_flight: number;
  }
  interface SeriesAnswer {
    readonly at_ms: number[];
    readonly adds: number[];
    readonly deliveries: number[];
    readonly failures: number[];
  }
  const total = (column: number[]): number => column.reduce((sum, value) => sum + value, 0);
  // Quiet: every timer due now delivered, and the cluster's series has the seconds that counted them.
  await waitFor('the due timers delivered and the series to have counted them', async () => {
    const stats = (await (await fetch(`${one.url}/v1/stats`)).json()) as { cluster: { nodes: number; totals: Totals } };
    const series = (await (await fetch(`${one.url}/v1/stats/series`)).json()) as SeriesAnswer;
    const totals = stats.cluster.totals;
    return stats.cluster.nodes === 2 && totals.delivered === 6 && totals.in_flight === 0 && total(series.deliveries) === 6;
  });
  const queues = (await (await fetch(`${two.url}/v1/queues`)).json()) as { queues: { name: string; delivered_per_s: number }[] };
  assert.ok((queues.queues.find((queue) => queue.name === 'default')?.delivered_per_s ?? 0) > 0, 'the default queue\'s deliveries a second, summed over the nodes');

  const page = await browser.newPage({ viewport: viewports.desktop, locale: 'en-US' });
  const problems = watchProblems(page);
  await page.goto(`${one.url}/ui`);
  await page.waitForSelector('[data-connection=streaming]');
  const shown = (selector: string, text: string): Promise<unknown> => page.waitForSelector(`${selector}:text-is("${text}")`, { timeout: 10_000 });
  const stats = (await (await fetch(`${one.url}/v1/stats`)).json()) as { cluster: { totals: Totals } };
  const cluster = 'section[aria-labelledby=cluster-totals-title]';
  for (const name of ['pending', 'delivered', 'dead', 'in_flight'] as const) await shown(`${cluster} [data-figure=${name}] dd`, numbers.format(stats.cluster.totals[name]));
  const due = (await (await fetch(`${two.url}/v1/stats/due-histogram`)).json()) as { buckets: { name: string; count: number }[]; total: number };
  assert.equal(due.total, stats.cluster.totals.pending);
  assert.equal(due.buckets[3]?.count, 2, 'the timers ten days away');
  assert.ok((due.buckets[1]?.count ?? 0) >= 4, 'the timers half an hour away, and the first test\'s');
  for (const bucket of due.buckets) await shown(`[data-figure=due_${bucket.name}] dd`, numbers.format(bucket.count));
  const series = (await (await fetch(`${one.url}/v1/stats/series`)).json()) as SeriesAnswer;
  await shown('[data-figure=added_15m] dd', numbers.format(total(series.adds)));
  await shown('[data-figure=delivered_15m] dd', numbers.format(total(series.deliveries)));
  await shown('[data-figure=failed_15m] dd', numbers.format(total(series.failures)));
  assert.ok(total(series.adds) >= specs.length, 'every add counted by the node that logged it');
  assert.equal(await page.locator('.chart canvas').count(), 3, 'the due histogram, rates and lateness charts are drawn');
  for (const [size, viewport] of Object.entries(viewports)) {
    await page.setViewportSize(viewport);
    assert.deepEqual(await axeViolations(page), [], `overview at ${size}`);
    await page.screenshot({ path: join(screenshotDir, `cluster-overview-${size}.png`), fullPage: true });
  }
  assert.deepEqual(problems, []);
  await page.close();
});
