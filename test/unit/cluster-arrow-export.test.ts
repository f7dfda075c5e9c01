// The cluster Arrow export's handling of a remote partition (ingest/http/cluster/arrow-export.ts),
// over an owner's answer made here: its body is taken only as the response is read (a reader
// that stops holds the owner's stream back, a chunk or two ahead at most), its bytes pass
// through whole between the export's schema and end marker however the owner cut them into
// chunks, and an answer that ends without the end marker fails the export.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { Table, tableToIPC } from 'apache-arrow';
import { exportSchema } from '../../engine/timer-export.ts';
import { clusterArrowExport } from '../../ingest/http/cluster/arrow-export.ts';
import type { ForwardStream } from '../../ingest/http/cluster/forwarder.ts';

const empty = Buffer.from(tableToIPC(new Table(exportSchema), 'stream'));
const schema = empty.subarray(0, empty.length - 8);
const end = empty.subarray(empty.length - 8);

/** An export of one remote partition whose owner answers with `chunks`, counting how many were taken. */
function remoteExport(chunks: readonly Buffer[]): { readable: Readable; taken: () => number } {
  let taken = 0;
  async function* body(): AsyncGenerator<Buffer> {
    for (const chunk of chunks) {
      taken++;
      yield chunk;
    }
  }
  const exported = clusterArrowExport({
    routeFor: (partition) => ({ kind: 'remote', partition, address: '127.0.0.1:9' }),
    open: async (): Promise<ForwardStream> => ({ status: 200, headers: {}, body: body() }),
    partitionHeader: 'fermata-partition',
  });
  return { readable: exported({}, [{ partition: 1, cursor: '' }], {}, {}), taken: () => taken };
}

async function readAll(readable: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of readable) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

test('a remote partition\'s answer is taken as the response is read, and passes through whole', async () => {
  const batches = Array.from({ length: 40 }, (_, i) => Buffer.alloc(1000, i));
  const { readable, taken } = remoteExport([schema, ...batches, end]);
  readable.pause();
  await once(readable, 'readable');
  for (let i = 0; i < 20; i++) await tick();
  assert.ok(taken() <= 4, `the owner's answer is held back while the response is not read (${taken()} of 42 chunks taken)`);
  const whole = await readAll(readable);
  assert.equal(taken(), 42);
  assert.deepEqual(whole, Buffer.concat([schema, ...batches, end]));
});

test('the schema and end marker are found however the owner\'s answer is cut; an answer without its end marker fails', async () => {
  const batch = Buffer.alloc(300, 7);
  const bytes = Buffer.concat([schema, batch, end]);
  // Cut into 5-byte chunks: the schema and the end marker each span several.
  const small = Array.from({ length: Math.ceil(bytes.length / 5) }, (_, i) => bytes.subarray(i * 5, i * 5 + 5));
  assert.deepEqual(await readAll(remoteExport(small).readable), bytes);
  await assert.rejects(readAll(remoteExport([schema, batch, end.subarray(0, 4)]).readable), /ended before its end marker/);
  await assert.rejects(readAll(remoteExport([Buffer.alloc(schema.length, 1), batch, end]).readable), /another schema/);
});
