// The ingest benchmark's ceiling server, run as a child process in place of `fermata serve`:
// the same HTTP adapter (createHttpServer: same listener, fastify options, hooks and JSON
// parsing) on an engine opened on the given data directory, plus `POST /noop`, which parses the
// JSON body like an add and answers {} without touching the engine. What the adds reach over
// what this reaches is the share of the request cost that is fermata's own work.
//
//   node bench/noop-server.ts DATA_DIR   → stdout: {"msg":"listening","url":"http://127.0.0.1:PORT"}
//
// Listens on 127.0.0.1, port 0; SIGTERM closes the server and the engine and exits 0.
import { pino } from 'pino';
import { Engine } from '../engine/engine.ts';
import { createHttpServer } from '../ingest/http/server.ts';

const dataDir = process.argv[2];
if (dataDir === undefined) {
  process.stderr.write('usage: node bench/noop-server.ts DATA_DIR\n');
  process.exit(2);
}

const engine = await Engine.open({ dataDir });
const app = createHttpServer({ logger: pino({ level: 'silent' }), engine });
app.post('/noop', async () => ({}));
await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
if (address === null || typeof address === 'string') throw new Error('the server has no TCP address');
process.stdout.write(`${JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${address.port}` })}\n`);

process.once('SIGTERM', () => {
  void app
    .close()
    .then(() => engine.close())
    .then(() => process.exit(0));
});
