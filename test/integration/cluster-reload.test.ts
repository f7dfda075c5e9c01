// Reload on a cluster node (`fermata serve --cluster` over a real PostgreSQL, one node owning
// both partitions), as on one node (scoped-tokens.test.ts): POST /v1/admin/reload swaps the
// tokens, SIGHUP swaps the signing secret in the node's shared delivery workers, and a queue's
// own signing secrets sign its deliveries.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { verifyWebhook } from '../../dispatch/signing.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { type Service, startService } from '../helpers/service.ts';
import { type Sink, type SinkRequest, startH1Sink } from '../helpers/sinks.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const secret = (): string => `whsec_${randomBytes(32).toString('base64')}`;
const [serviceSecret, paymentsSecret, rotatedSecret] = [secret(), secret(), secret()];
const tokens = { admin: 'admin-token-0000000000', writer: 'writer-token-000000000', writer2: 'writer2-token-00000000' };

describe('reload on a cluster node', { skip: skipUnlessTool('initdb'), timeout: 120_000 }, () => {
  const children = new Set<ChildProcess>();
  const dirs: string[] = [];
  let server: PostgresServer | undefined;
  let sink: Sink | undefined;
  after(async () => {
    for (const child of children) child.kill('SIGKILL');
    await sink?.close();
    await server?.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  test('POST /v1/admin/reload swaps the tokens, SIGHUP the signing secret; a queue with its own secrets signs with them', async () => {
    server = await startPostgres();
    const url = await server.createDatabase('reload');
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    await initCluster(admin, 2);
    await admin.end();
    sink = await startH1Sink();
    const dataDir = mkdtempSync(join(tmpdir(), 'fermata-cluster-reload-'));
    dirs.push(dataDir);
    const configFile = join(dataDir, 'config.json');
    const writeConfig = (writer: string, signing: string): void =>
      writeFileSync(
        configFile,
        JSON.stringify({
          tokens: [tokens.admin, { name: 'writer', token: writer, scopes: ['read', 'write'] }],
          cluster: { node_id: 'node-1', lease_ttl_ms: 1_000, renew_ms: 200, secret: 'reload-secret' },
          dispatch: { threads: 1, signing_secrets: [signing], queue_signing_secrets: { payments: [paymentsSecret] } },
        }),
      );
    writeConfig(tokens.writer, serviceSecret);
    const service: Service = await startService(join(dataDir, 'data'), (child) => children.add(child), { args: ['--cluster', url, '--config', configFile] });

    const call = async (method: string, path: string, token: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
      const response = await fetch(`${service.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(10_000),
      });
      return { status: response.status, json: (await response.json()) as Record<string, unknown> };
    };
    const delivered = async (path: string): Promise<SinkRequest> => {
      for (const deadline = Date.now() + 20_000; Date.now() < deadline; await sleep(20)) {
        const [request] = sink?.to(path) ?? [];
        if (request !== undefined) return request;
      }
      throw new Error(`nothing delivered to ${path}:\n${service.output().slice(-2_000)}`);
    };
    const verdict = (request: SinkRequest, key: string): string => verifyWebhook(key, request.headers, request.body, { toleranceS: 300, nowMs: Date.now() });
    const add = async (queue: string, path: string, token = tokens.writer): Promise<number> => (await call('POST', '/v1/timers', token, { delay_ms: 0, target: `${sink?.url}${path}`, payload: path, queue })).status;

    for (const deadline = Date.now() + 20_000; (await fetch(`${service.url}/readyz`)).status !== 200; await sleep(50)) assert.ok(Date.now() < deadline, 'the node joined');
    // Adds answer PARTITION_MOVING until the node has opened its partitions.
    for (const deadline = Date.now() + 20_000; (await add('payments', '/payments')) !== 201; await sleep(100)) assert.ok(Date.now() < deadline, 'the node takes adds');
    assert.equal(await add('default', '/default'), 201);
    assert.equal(verdict(await delivered('/payments'), paymentsSecret), 'valid', "the queue's own secret signs its deliveries");
    assert.equal(verdict(await delivered('/default'), serviceSecret), 'valid');

    writeConfig(tokens.writer2, serviceSecret);
    const reloaded = await call('POST', '/v1/admin/reload', tokens.admin);
    assert.equal(reloaded.status, 200, JSON.stringify(reloaded.json));
    assert.deepEqual(reloaded.json, { reloaded: true, changed: ['tokens'] });
    assert.equal((await call('GET', '/v1/stats', tokens.writer)).status, 401, 'the old token is refused');
    assert.equal((await call('GET', '/v1/stats', tokens.writer2)).status, 200, 'the new one is taken');

    writeConfig(tokens.writer2, rotatedSecret);
    service.child.kill('SIGHUP');
    for (const deadline = Date.now() + 10_000; !/"audit":"reload","who":"SIGHUP","changed":\["signing_secrets"\]/.test(service.output()); await sleep(20)) {
      assert.ok(Date.now() < deadline, `no reload line after SIGHUP:\n${service.output().slice(-2_000)}`);
    }
    assert.equal(await add('default', '/rotated', tokens.writer2), 201);
    const rotated = await delivered('/rotated');
    assert.equal(verdict(rotated, rotatedSecret), 'valid', 'signed with the new secret');
    assert.equal(verdict(rotated, serviceSecret), 'no_match');
    assert.equal(service.child.exitCode, null, 'the node serves on');
  });
});
