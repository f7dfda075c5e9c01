// HTTP abuse against a real `fermata serve` child (test/helpers/http-attacks.ts, each attack in
// a process of its own: test/helpers/attack-child.ts): HTTP/2 rapid reset, CONTINUATION flood,
// HTTP/1.1 header flood, slowloris, and as many idle HTTP/2 connections as the file-descriptor
// limit allows, up to 10,000. During each attack this process runs a closed loop of legitimate
// adds; the test asserts survival and correctness only: the service is still running, every
// legitimate request was answered 201 within the request bound, /healthz answers after the attack. How much slower the legitimate requests got (p99 against a baseline) is a
// figure, not an assertion: `npm run bench -- abuse` prints it (bench/abuse.ts).
//
// Sizes: each attack 3 s (`npm run soak`: 30 s); idle connections min(10,000, ulimit -n − 1,024).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, before, test, type TestContext } from 'node:test';
import { H2Client } from '../helpers/h2-client.ts';
import { type AttackName, spawnAttacker } from '../helpers/attack-child.ts';
import { type AttackReport, legitimateLoad, quantile } from '../helpers/http-attacks.ts';
import { testScratch } from '../helpers/scratch.ts';
import { type Service, startService } from '../helpers/service.ts';
import { soak } from '../helpers/soak.ts';

const sizes = {
  attackMs: soak ? 30_000 : 3_000,
  idleConnectionsMax: 10_000,
  /** File descriptors kept free for everything else in either process. */
  descriptorsSpare: 1_024,
} as const;

const scratch = testScratch('fermata-abuse');

/** The soft limit on open files, as this shell (and so the child) has it. */
function openFilesLimit(): number {
  const text = execFileSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim();
  return text === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(text);
}

async function assertHealthy(service: Service): Promise<void> {
  assert.equal(service.child.exitCode, null, `fermata exited:\n${service.output().slice(-2_000)}`);
  assert.equal(service.child.signalCode, null);
  const client = await H2Client.connect(service.url, 10_000);
  try {
    const answer = await client.request({ method: 'GET', path: '/healthz' });
    assert.equal(answer.status, 200);
  } finally {
    client.close();
  }
}

/** Runs the attack with legitimate load beside it; asserts every legitimate request was answered 201. */
async function underAttack(t: TestContext, service: Service, name: AttackName, idleCount = 0): Promise<AttackReport> {
  const attacker = spawnAttacker(name, service.url, sizes.attackMs, idleCount);
  await attacker.started;
  const load = await legitimateLoad(service.url, sizes.attackMs);
  const report = await attacker.report;
  t.diagnostic(`${name}: ${JSON.stringify(report.facts)}; legitimate adds ${load.latenciesMs.length}, p99 ${quantile(load.latenciesMs, 0.99).toFixed(1)} ms, failures ${load.failures.length}`);
  assert.deepEqual(load.failures.slice(0, 3), [], `${load.failures.length} legitimate requests failed during ${name}`);
  assert.ok(load.latenciesMs.length > 0, `no legitimate request was answered during ${name}`);
  await assertHealthy(service);
  return report;
}

describe('HTTP abuse: the service survives and keeps answering legitimate requests', { concurrency: 1 }, () => {
  let service: Service;
  before(async () => {
    service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child));
  });

  test('baseline: legitimate adds alone', { timeout: 60_000 }, async (t) => {
    const load = await legitimateLoad(service.url, sizes.attackMs);
    t.diagnostic(`baseline: legitimate adds ${load.latenciesMs.length}, p99 ${quantile(load.latenciesMs, 0.99).toFixed(1)} ms`);
    assert.deepEqual(load.failures, []);
    assert.ok(load.latenciesMs.length > 0);
  });

  test('HTTP/2 rapid reset: streams opened and cancelled at once, sessions reopened when closed', { timeout: 120_000 }, async (t) => {
    await underAttack(t, service, 'rapid_reset');
  });

  test('HTTP/2 CONTINUATION flood: a header block without end', { timeout: 120_000 }, async (t) => {
    await underAttack(t, service, 'continuation_flood');
  });

  test('HTTP/1.1 header flood: header lines without end', { timeout: 120_000 }, async (t) => {
    await underAttack(t, service, 'header_flood');
  });

  test('slowloris: 500 HTTP/1.1 requests whose headers trickle in', { timeout: 120_000 }, async (t) => {
    await underAttack(t, service, 'slowloris');
  });

  test(`idle HTTP/2 connections: min(${sizes.idleConnectionsMax}, ulimit -n − ${sizes.descriptorsSpare}) held open`, { timeout: 180_000 }, async (t) => {
    const wanted = Math.min(sizes.idleConnectionsMax, openFilesLimit() - sizes.descriptorsSpare);
    t.diagnostic(`ulimit -n ${openFilesLimit()}: ${wanted} idle connections wanted`);
    const report = await underAttack(t, service, 'idle_connections', wanted);
    assert.equal(report.facts.connections, wanted, 'every idle connection was accepted');
    assert.equal(report.facts.closed_by_server, 0, 'idle sessions are kept until their idle timeout');
  });
});
