// @fermata/client and the test clock: against a real `fermata serve --clock manual`, a timer due
// in 30 days is delivered once moveClock({ advance_ms }) passes its time, in a second of real
// time; clock() and moveClock({ set }) answer where the clock stands, and a move backwards is a
// FermataError CLOCK_BACKWARDS.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type net from 'node:net';
import { test } from 'node:test';
import { FermataClient, FermataError } from '@fermata/client';
import { testScratch } from '../helpers/scratch.ts';
import { startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';

const scratch = testScratch('fermata-client-clock');
const dayMs = 86_400_000;

test('a timer 30 days ahead is delivered when the test clock is moved past it', { timeout: 60_000 }, async () => {
  const receiver = http.createServer((request, response) => {
    request.resume().on('end', () => response.writeHead(204).end());
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  const service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child), { args: ['--clock', 'manual'] });
  const client = new FermataClient({ url: service.url });
  try {
    const start = await client.clock();
    assert.equal(start.mode, 'manual');
    const delivered = once(receiver, 'request');
    const { id } = await client.add({ delay_ms: 30 * dayMs, target: `http://127.0.0.1:${(receiver.address() as net.AddressInfo).port}/hook`, payload: 'a month later' });
    const moved = await client.moveClock({ advance_ms: 30 * dayMs });
    assert.equal(moved.now_ms, start.now_ms + 30 * dayMs);
    const [request] = (await withTimeout(delivered, 20_000, 'the delivery')) as [http.IncomingMessage];
    assert.equal(request.headers['fermata-timer-id'], id);
    assert.equal((await client.moveClock({ set: new Date(moved.now_ms + dayMs) })).now_ms, moved.now_ms + dayMs);
    await assert.rejects(client.moveClock({ set: start.now_ms }), (err: unknown) => err instanceof FermataError && err.code === 'CLOCK_BACKWARDS' && err.status === 409);
  } finally {
    await client.close();
    receiver.closeAllConnections();
    receiver.close();
  }
});
