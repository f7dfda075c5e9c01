// The dashboard on a cluster node: one real `fermata serve --cluster` over PostgreSQL (P = 2,
// short leases) in headless Chromium. With no event stream there, the page polls and says so; it
// shows the Cluster panel (this node, the
// partitions it owns, every partition's owner, as GET /v1/cluster answers) and the cluster's
// totals, and the Queues and Schedules panels over the cluster's queues and schedules; axe-core finds no
// WCAG A/AA violation; screenshots at both sizes. Skips (fails under CI) without PostgreSQL or
// chromium.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import postgres from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { waitFor } from '../helpers/chromium.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { startService } from '../helpers/service.ts';
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

let server: PostgresServer | undefined;
after(async () => {
  for (const child of children) child.kill('SIGKILL');
  await server?.stop();
});

test('a cluster node\'s dashboard shows the cluster panel, the queues and the schedules', { skip: missing, timeout: 120_000 }, async () => {
  await buildDashboard();
  server = await startPostgres();
  const url = await server.createDatabase('ui');
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  await initCluster(admin, partitions);
  await admin.end();
  const dataDir = tempDir('data');
  const config = join(dataDir, 'config.json');
  writeFileSync(config, JSON.stringify({ cluster: { node_id: 'node-ui', lease_ttl_ms: 1_000, renew_ms: 200 }, dispatch: { threads: 1 } }));
  const node = await startService(dataDir, (child) => children.add(child), { args: ['--cluster', url, '--config', config], env: { FERMATA_CLUSTER_SECRET: 'the-ui-cluster-secret' } });
  let view: ClusterView | undefined;
  await waitFor('the node to own every partition', async () => {
    const answer = await fetch(`${node.url}/v1/cluster`);
    view = answer.ok ? ((await answer.json()) as ClusterView) : undefined;
    return view !== undefined && view.owned.length === partitions && view.owners.every((owner) => owner.address !== null);
  });
  const added = await fetch(`${node.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ delay_ms: 3_600_000, target: 'http://127.0.0.1:9/x', payload: 'p' }) });
  assert.equal(added.status, 201);

  const browser = await launchChromium(toolPath('chromium') as string);
  try {
    const page = await browser.newPage({ viewport: viewports.desktop, locale: 'en-US' });
    const problems = watchProblems(page, [/404 .*\/v1\/events(\?|$)/]);
    await page.goto(`${node.url}/ui`);
    await page.waitForSelector('[data-figure=pending] dd:text-is("1")');
    // A cluster node serves no event stream: the page polls GET /v1/stats once a second instead, and says so.
    await page.waitForSelector('[data-connection=polling]');
    const tabs = await page.$$eval('nav button', (buttons) => buttons.map((button) => button.getAttribute('data-tab')));
    assert.deepEqual(tabs, ['overview', 'queues', 'dead', 'timer', 'schedules', 'cluster']);
    const configured = await fetch(`${node.url}/v1/queues/billing`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ max_attempts: 3 }) });
    assert.equal(configured.status, 200, await configured.text());
    await page.click('nav [data-tab=queues]');
    await page.waitForSelector('tr[data-queue=billing]');
    const scheduled = await fetch(`${node.url}/v1/schedules/hourly`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ every_ms: 3_600_000, target: 'http://127.0.0.1:9/x' }) });
    assert.equal(scheduled.status, 200);
    await page.click('nav [data-tab=schedules]');
    await page.waitForSelector('tr[data-schedule=hourly]');

    await page.click('nav [data-tab=cluster]');
    await page.waitForSelector('[data-figure=node_id] dd:text-is("node-ui")');
    assert.equal(await page.textContent('[data-figure=partitions] dd'), String(partitions));
    assert.equal(await page.textContent('[data-figure=owned] dd'), String(partitions));
    // The rows as GET /v1/cluster answers now (the service is quiet: what it says stays).
    const now = (await (await fetch(`${node.url}/v1/cluster`)).json()) as ClusterView;
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
  } finally {
    await browser.close();
  }
});
