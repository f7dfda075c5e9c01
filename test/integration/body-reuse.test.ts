// Arrow bodies are read into buffers that later requests reuse (ingest/http/body/body-buffers.ts).
// Writers adding Arrow batches back to back, each request's payloads a byte of its own, large
// enough that the log writes the body where it lies, so that new bodies are read while earlier
// ones are being logged: every timer holds its own request's payload, in the store and in the
// log (a reopen replays it), so no buffer was reused while its body was in use.
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import type net from 'node:net';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { tableFromIPC } from 'apache-arrow';
import pino from 'pino';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine } from '../../engine/engine.ts';
import { decodeTimerId } from '../../engine/ids.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { batchToArrow } from '../helpers/arrow.ts';
import { testScratch } from '../helpers/scratch.ts';
import { wrappedFileSystem } from '../helpers/wrapped-file-system.ts';

const scratch = testScratch('fermata-body-reuse');
const rows = 300;
/** 300 rows of 256 bytes: over the 64 KiB above which the log writes a body in place. */
const payloadBytes = 256;
const writers = 4;
const perWriter = 5;

/**
 * The real disk, each write and fdatasync 10 ms slower: commit groups then overlap the next
 * requests, whose bodies are read while earlier ones are still being written from where they lie.
 */
const slowSyncs = wrappedFileSystem((handle) => ({
  writev: async (chunks, position) => {
    await sleep(10);
    await handle.writev(chunks, position);
  },
  datasync: async () => {
    await sleep(10);
    await handle.datasync();
  },
}));

function arrowBody(fill: number): Uint8Array {
  const fireAtMs = Date.now() + 3_600_000;
  const payload = new Uint8Array(payloadBytes).fill(fill);
  return batchToArrow(batchFromSpecs(Array.from({ length: rows }, () => ({ fireAtMs, target: 'https://example.com/hook', payload }))));
}

function post(session: http2.ClientHttp2Session, body: Uint8Array): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const request = session.request({
      ':method': 'POST',
      ':path': '/v1/timers',
      'content-type': 'application/vnd.apache.arrow.stream',
      accept: 'application/vnd.apache.arrow.stream',
    });
    const chunks: Buffer[] = [];
    let status = 0;
    request.on('response', (headers) => (status = Number(headers[':status'])));
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve({ status, body: Buffer.concat(chunks) }));
    request.on('error', reject);
    request.end(body);
  });
}

/** Every timer of every request holds its own request's fill byte, all of its payload. */
function assertPayloads(engine: Engine, idsByFill: ReadonlyMap<number, readonly string[]>, when: string): void {
  for (const [fill, ids] of idsByFill) {
    assert.equal(ids.length, rows);
    for (const id of ids) {
      const parts = decodeTimerId(id);
      assert.ok(parts !== undefined, id);
      const delivery = engine.deliveryOf(parts.seq, parts.row);
      assert.ok(delivery !== undefined, `${when}: ${id} is resident`);
      const payload = delivery.bytes.subarray(0, payloadBytes);
      assert.ok(
        payload.length === payloadBytes && payload.every((byte) => byte === fill),
        `${when}: timer ${id} of request ${fill} holds [${payload.subarray(0, 8).join(',')}…], not its request's bytes`,
      );
    }
  }
}

test('Arrow adds back to back from concurrent writers: each timer keeps its own request payload, in memory and after a replay', async () => {
  const dataDir = scratch.tempDir('data');
  let engine = await Engine.open({ dataDir, fs: slowSyncs });
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const session = http2.connect(`http://127.0.0.1:${(app.server.address() as net.AddressInfo).port}`);
  const idsByFill = new Map<number, string[]>();
  try {
    await Promise.all(
      Array.from({ length: writers }, async (_, writer) => {
        for (let n = 0; n < perWriter; n++) {
          const fill = 1 + writer * perWriter + n;
          const answer = await post(session, arrowBody(fill));
          assert.equal(answer.status, 201, answer.body.toString());
          idsByFill.set(fill, [...(tableFromIPC(answer.body).getChild('id')?.toArray() as string[])]);
        }
      }),
    );
    assert.equal(idsByFill.size, writers * perWriter);
    assertPayloads(engine, idsByFill, 'in memory');
  } finally {
    session.close();
    await app.close();
    await engine.close();
  }
  engine = await Engine.open({ dataDir });
  try {
    assertPayloads(engine, idsByFill, 'after a replay');
  } finally {
    await engine.close();
  }
});
