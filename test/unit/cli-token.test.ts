// The human commands send --token (or FERMATA_TOKEN) as a bearer token to --url (or
// FERMATA_URL): a small HTTP/1.1 server on loopback port 0 records what it was sent.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { runHumanCommand } from '../../cli/commands/program.ts';

const seen: { path: string; authorization: string | undefined }[] = [];
const server = http.createServer((request, response) => {
  seen.push({ path: request.url ?? '', authorization: request.headers.authorization });
  response.writeHead(200, { 'content-type': 'application/json' }).end('{"pending":0}');
});
let url = '';

before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => {
  server.close();
  delete process.env.FERMATA_URL;
  delete process.env.FERMATA_TOKEN;
});

test('--token is sent as a bearer token to --url', async () => {
  assert.equal(await runHumanCommand(['stats', '--json', '--url', url, '--token', 'flag-token']), 0);
  assert.deepEqual(seen.at(-1), { path: '/v1/stats', authorization: 'Bearer flag-token' });
});

test('FERMATA_URL and FERMATA_TOKEN stand in for the flags', async () => {
  process.env.FERMATA_URL = url;
  process.env.FERMATA_TOKEN = 'env-token';
  assert.equal(await runHumanCommand(['stats', '--json']), 0);
  assert.deepEqual(seen.at(-1), { path: '/v1/stats', authorization: 'Bearer env-token' });
});
