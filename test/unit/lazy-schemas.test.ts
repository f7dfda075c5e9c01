// Route schemas compiled at first use (ingest/http/lazy-schemas.ts): nothing is compiled while
// fastify gets ready, a request compiles its route's schemas and is judged exactly as by
// fastify's own compilers (the refusal's ajv errors, querystring coercion, response
// serialization), and warmUp compiles what is left once the server listens.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fastify from 'fastify';
import pino from 'pino';
import { Engine } from '../../engine/engine.ts';
import { LazySchemas } from '../../ingest/http/lazy-schemas.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

function appWith(schemas: LazySchemas | undefined) {
  const app = fastify(schemas === undefined ? {} : { schemaController: schemas.controller });
  app.post(
    '/things',
    {
      schema: {
        body: { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 2 } }, additionalProperties: false },
        querystring: { type: 'object', properties: { n: { type: 'integer' } } },
        response: { 200: { type: 'object', properties: { name: { type: 'string' }, n: { type: 'integer' } } } },
      },
    },
    async (request) => {
      const query = request.query as { n?: number };
      // A field the response schema does not name: the serializer drops it.
      return { name: (request.body as { name: string }).name, n: query.n, secret: 'not shown' };
    },
  );
  app.get('/other', { schema: { querystring: { type: 'object', properties: { flag: { type: 'boolean' } } } } }, async (request) => request.query);
  return app;
}

async function answers(schemas: LazySchemas | undefined) {
  const app = appWith(schemas);
  await app.ready();
  const waitingAtReady = schemas?.waiting;
  const good = await app.inject({ method: 'POST', url: '/things?n=7', payload: { name: 'ab' } });
  const bad = await app.inject({ method: 'POST', url: '/things', payload: { name: 'a' } });
  const extra = await app.inject({ method: 'POST', url: '/things', payload: { name: 'ab', more: 1 } });
  const coerced = await app.inject({ method: 'GET', url: '/other?flag=true' });
  await app.close();
  return {
    waitingAtReady,
    replies: [good, bad, extra, coerced].map((reply) => ({ status: reply.statusCode, body: reply.body })),
  };
}

test('a route judged by lazily compiled schemas answers exactly as with fastify\'s own compilers', async () => {
  const eager = await answers(undefined);
  const lazy = await answers(new LazySchemas());
  assert.deepEqual(lazy.replies, eager.replies);
  assert.deepEqual(JSON.parse(lazy.replies[0]?.body ?? ''), { name: 'ab', n: 7 }, 'querystring coerced, the response serialized by its schema');
  assert.equal(lazy.replies[1]?.status, 400);
  assert.match(lazy.replies[1]?.body ?? '', /must NOT have fewer than 2 characters/);
  assert.deepEqual(JSON.parse(lazy.replies[3]?.body ?? ''), { flag: true });
  assert.ok((lazy.waitingAtReady ?? 0) >= 4, 'every schema waits after ready: body, querystring and response of one route, the other route\'s querystring');
});

test('nothing is compiled before the first request or warmUp; warmUp compiles every waiting schema, one a turn', async () => {
  const schemas = new LazySchemas();
  const app = appWith(schemas);
  await app.ready();
  const waiting = schemas.waiting;
  assert.ok(waiting >= 4);
  schemas.warmUp();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(schemas.waiting, waiting - 1, 'one compile a turn');
  for (let turn = 0; turn < waiting + 2 && schemas.waiting > 0; turn++) await new Promise((resolve) => setImmediate(resolve));
  assert.equal(schemas.waiting, 0);
  const reply = await app.inject({ method: 'POST', url: '/things', payload: { name: 'a' } });
  assert.equal(reply.statusCode, 400, 'a schema compiled by warmUp still judges');
  await app.close();
});

test('every route schema of the service compiles: warmUp after listening gets through all of them', async () => {
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 18 }) });
  const schemas = new LazySchemas();
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine, schemas });
  try {
    await app.ready();
    const waiting = schemas.waiting;
    assert.ok(waiting > 40, `the routes have their schemas (${waiting} waiting)`);
    await app.listen({ host: '127.0.0.1', port: 0 });
    // A schema that does not compile throws in warmUp's turn: an uncaught exception fails this file.
    for (let turn = 0; turn < waiting * 4 && schemas.waiting > 0; turn++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(schemas.waiting, 0);
  } finally {
    await app.close();
    await engine.close();
  }
});
