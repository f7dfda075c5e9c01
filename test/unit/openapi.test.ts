// GET /openapi.json (ingest/http/routes/openapi.ts) held to the code: the document is valid OpenAPI
// 3.1; its paths are exactly the routes fastify has; every error code it lists answers with the
// status it is listed under (error-map.ts), with Retry-After where documented; live answers of
// every kind (success, 4xx, overload, a poisoned log) have a documented status, media type and
// a body that validates against the documented schema; the security it states is what a server
// with tokens enforces; queue ranges and defaults are the engine's.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import SwaggerParser from '@apidevtools/swagger-parser';
import { tableFromIPC } from 'apache-arrow';
import type { LightMyRequestResponse as Response } from 'fastify';
import { pino } from 'pino';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine, type EngineOptions } from '../../engine/engine.ts';
import { type ErrorCode, errorCodes, FermataError } from '../../engine/errors.ts';
import { ingestLimits } from '../../engine/limits.ts';
import { errorAnswer, type HttpErrorCode, HttpProblem } from '../../ingest/http/error-map.ts';
import { openApiDocument } from '../../ingest/http/routes/openapi.ts';
import { createHttpServer, type HttpServer } from '../../ingest/http/server.ts';
import { batchToArrow } from '../helpers/arrow.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

type Json = Readonly<Record<string, unknown>>;

const arrowType = 'application/vnd.apache.arrow.stream';
const httpMethods = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);
const token = 'openapi-test-token-0123456789';
const target = 'https://a.example/hook';

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function obj(value: unknown, what: string): Json {
  assert.ok(isObject(value), `${what} is not an object`);
  return value;
}

/** Follows local `$ref`s (#/a/b) to the object they name. */
function deref(doc: Json, value: unknown): Json {
  let node = obj(value, 'schema');
  for (let hops = 0; typeof node.$ref === 'string'; hops++) {
    assert.ok(hops < 10, `$ref loop at ${node.$ref}`);
    const ref: string = node.$ref;
    assert.ok(ref.startsWith('#/'), `non-local $ref ${ref}`);
    let at: unknown = doc;
    for (const part of ref.slice(2).split('/')) at = obj(at, ref)[part.replaceAll('~1', '/').replaceAll('~0', '~')];
    node = obj(at, ref);
  }
  return node;
}

function typeMatches(type: unknown, value: unknown): boolean {
  switch (type) {
    case 'null':
      return value === null;
    case 'boolean':
      return typeof value === 'boolean';
    case 'integer':
      return Number.isInteger(value);
    case 'number':
      return typeof value === 'number';
    case 'string':
      return typeof value === 'string';
    case 'array':
      return Array.isArray(value);
    case 'object':
      return isObject(value);
  }
  return false;
}

/**
 * The JSON Schema 2020-12 keywords the document uses, enough to hold live answers to it. Pushes
 * what fails onto `errors`; returns the property names evaluated (for unevaluatedProperties).
 */
function check(doc: Json, schemaIn: unknown, value: unknown, at: string, errors: string[]): Set<string> {
  const schema = deref(doc, schemaIn);
  const evaluated = new Set<string>();
  for (const sub of (schema.allOf as unknown[] | undefined) ?? []) for (const name of check(doc, sub, value, at, errors)) evaluated.add(name);
  if (schema.oneOf !== undefined) {
    const passing = (schema.oneOf as unknown[]).flatMap((sub) => {
      const subErrors: string[] = [];
      const names = check(doc, sub, value, at, subErrors);
      return subErrors.length === 0 ? [names] : [];
    });
    if (passing.length !== 1) errors.push(`${at}: matches ${passing.length} of oneOf`);
    for (const name of passing[0] ?? []) evaluated.add(name);
  }
  if (schema.not !== undefined) {
    const subErrors: string[] = [];
    check(doc, schema.not, value, at, subErrors);
    if (subErrors.length === 0) errors.push(`${at}: matches "not"`);
  }
  if ('const' in schema && !isDeepStrictEqual(value, schema.const)) errors.push(`${at}: ${JSON.stringify(value)} is not ${JSON.stringify(schema.const)}`);
  if (schema.enum !== undefined && !(schema.enum as unknown[]).some((option) => isDeepStrictEqual(option, value))) errors.push(`${at}: ${JSON.stringify(value)} not in enum`);
  if (schema.type !== undefined && ![schema.type].flat().some((type) => typeMatches(type, value))) errors.push(`${at}: ${JSON.stringify(value)} is not ${JSON.stringify(schema.type)}`);
  if (typeof value === 'string') {
    if (typeof schema.pattern === 'string' && !new RegExp(schema.pattern, 'u').test(value)) errors.push(`${at}: ${JSON.stringify(value)} does not match ${schema.pattern}`);
    if (typeof schema.minLength === 'number' && [...value].length < schema.minLength) errors.push(`${at}: shorter than ${schema.minLength}`);
    if (typeof schema.maxLength === 'number' && [...value].length > schema.maxLength) errors.push(`${at}: longer than ${schema.maxLength}`);
    if (schema.format === 'date-time' && !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(value)) errors.push(`${at}: ${value} is not a date-time`);
  }
  if (typeof value === 'number') {
    if (typeof schema.minimum === 'number' && value < schema.minimum) errors.push(`${at}: ${value} < ${schema.minimum}`);
    if (typeof schema.maximum === 'number' && value > schema.maximum) errors.push(`${at}: ${value} > ${schema.maximum}`);
  }
  if (Array.isArray(value) && schema.items !== undefined) value.forEach((item, i) => check(doc, schema.items, item, `${at}[${i}]`, errors));
  if (isObject(value)) {
    const properties = isObject(schema.properties) ? schema.properties : {};
    for (const [name, sub] of Object.entries(properties)) {
      evaluated.add(name);
      if (name in value) check(doc, sub, value[name], `${at}.${name}`, errors);
    }
    for (const name of (schema.required as string[] | undefined) ?? []) if (!(name in value)) errors.push(`${at}: missing ${name}`);
    if (schema.additionalProperties !== undefined) {
      for (const name of Object.keys(value)) {
        if (name in properties) continue;
        evaluated.add(name);
        if (schema.additionalProperties === false) errors.push(`${at}: unexpected ${name}`);
        else check(doc, schema.additionalProperties, value[name], `${at}.${name}`, errors);
      }
    }
    if (schema.unevaluatedProperties === false) for (const name of Object.keys(value)) if (!evaluated.has(name)) errors.push(`${at}: unevaluated ${name}`);
  }
  return evaluated;
}

function operationOf(doc: Json, method: string, path: string): Json {
  const item = obj(obj(doc.paths, 'paths')[path], `path ${path}`);
  return obj(item[method.toLowerCase()], `${method} ${path}`);
}

/** Asserts `response` is documented for the operation: its status, its media type, its body's schema, Retry-After. */
function assertDocumented(doc: Json, method: string, path: string, response: Response): void {
  const what = `${method} ${path} → ${response.statusCode}`;
  const documented = obj(operationOf(doc, method, path).responses, `${method} ${path} responses`)[String(response.statusCode)];
  // A stream's answer (payloadAsStream) has no body here.
  assert.ok(documented !== undefined, `${what} is not documented (${(response.body ?? '').slice(0, 200)})`);
  const answer = deref(doc, documented);
  const mediaType = String(response.headers['content-type'] ?? '').split(';')[0]?.trim() ?? '';
  const content = obj(answer.content, `${what} content`);
  assert.ok(mediaType in content, `${what}: media type ${mediaType} is not documented (${Object.keys(content).join(', ')})`);
  if (mediaType === 'application/json') {
    const errors: string[] = [];
    check(doc, obj(content[mediaType], what).schema, response.json(), '$', errors);
    assert.deepEqual(errors, [], `${what}: ${response.body.slice(0, 300)}`);
  }
  const headers = isObject(answer.headers) ? answer.headers : {};
  if (response.headers['retry-after'] !== undefined) assert.ok('Retry-After' in headers, `${what} sends Retry-After, undocumented`);
  if ('WWW-Authenticate' in headers) assert.equal(response.headers['www-authenticate'], 'Bearer', what);
}

async function withServer(options: { tokens?: string[]; engine?: Partial<EngineOptions>; fs?: SimFileSystem }, run: (app: HttpServer, fs: SimFileSystem) => Promise<void>): Promise<void> {
  const fs = options.fs ?? new SimFileSystem({ seed: 91 });
  const engine = await Engine.open({ dataDir: '/data', fs, ...options.engine });
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine, ...(options.tokens === undefined ? {} : { tokens: options.tokens }) });
  try {
    await app.ready();
    await run(app, fs);
  } finally {
    await app.close();
    await engine.close();
  }
}

async function servedDocument(app: HttpServer, headers: Record<string, string> = {}): Promise<Json> {
  const response = await app.inject({ method: 'GET', url: '/openapi.json', headers });
  assert.equal(response.statusCode, 200);
  assert.match(String(response.headers['content-type']), /^application\/json\b/);
  return obj(response.json(), 'the document');
}

/** Every route fastify has, from its printed tree (`commonPrefix: false`: one line a path segment). */
function registeredRoutes(app: HttpServer): Array<{ method: string; path: string }> {
  const routes: Array<{ method: string; path: string }> = [];
  const prefixes: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    if (line.trim() === '') continue;
    const match = /^((?:│ {3}| {4})*)[├└]── (\S+)(?: \(([A-Z, ]+)\))?$/u.exec(line);
    assert.ok(match !== null, `unexpected printRoutes line ${JSON.stringify(line)}`);
    const depth = (match[1] ?? '').length / 4;
    prefixes.length = depth;
    const path = (prefixes[depth - 1] ?? '') + match[2];
    prefixes.push(path);
    for (const method of match[3]?.split(', ') ?? []) routes.push({ method, path });
  }
  return routes;
}

const toOpenApiPath = (path: string): string => path.replace(/:(\w+)/g, '{$1}');
const toFastifyPath = (path: string): string => path.replace(/\{(\w+)\}/g, ':$1');

function documentedOperations(doc: Json): Array<{ method: string; path: string; operation: Json }> {
  return Object.entries(obj(doc.paths, 'paths')).flatMap(([path, item]) =>
    Object.entries(obj(item, path))
      .filter(([key]) => httpMethods.has(key))
      .map(([method, operation]) => ({ method: method.toUpperCase(), path, operation: obj(operation, `${method} ${path}`) })),
  );
}

test('GET /openapi.json: a valid OpenAPI 3.1 document, the one openapi.ts holds', async () => {
  await withServer({}, async (app) => {
    const doc = await servedDocument(app);
    assert.match(String(doc.openapi), /^3\.1\.\d+$/);
    assert.deepEqual(doc, JSON.parse(JSON.stringify(openApiDocument)));
    // The validator dereferences in place: give it a copy.
    await SwaggerParser.validate(structuredClone(doc) as never);
    const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    assert.equal(obj(doc.info, 'info').version, packageJson.version);
    const scheme = obj(obj(obj(doc.components, 'components').securitySchemes, 'securitySchemes').bearerAuth, 'bearerAuth');
    assert.deepEqual([scheme.type, scheme.scheme], ['http', 'bearer']);
    assert.match(String(scheme.description), /only when/);
    // The validator is not a rubber stamp.
    await assert.rejects(SwaggerParser.validate({ ...structuredClone(doc), paths: { '/x': { get: { responses: { '200': {} } } } } } as never));
  });
});

test('the documented paths are exactly the routes fastify has registered, method by method', async () => {
  await withServer({}, async (app) => {
    const doc = await servedDocument(app);
    const routes = registeredRoutes(app);
    assert.ok(routes.length >= 10, `parsed only ${routes.length} routes`);
    for (const route of routes) assert.ok(app.hasRoute({ method: route.method as 'GET', url: route.path }), `parsed a route fastify does not have: ${route.method} ${route.path}`);
    const gets = new Set(routes.filter((route) => route.method === 'GET').map((route) => route.path));
    const heads = new Set(routes.filter((route) => route.method === 'HEAD').map((route) => route.path));
    // fastify answers HEAD for every GET route (exposeHeadRoutes); the document says so once instead of per path.
    assert.deepEqual([...heads].sort(), [...gets].sort(), 'every GET route, and only those, also answers HEAD');
    assert.match(String(obj(doc.info, 'info').description), /Every GET route also answers HEAD/);
    const registered = new Set(routes.filter((route) => route.method !== 'HEAD').map((route) => `${route.method} ${toOpenApiPath(route.path)}`));
    const documented = new Set(documentedOperations(doc).map(({ method, path }) => `${method} ${path}`));
    for (const route of registered) assert.ok(documented.has(route), `${route} is served but not documented`);
    for (const operation of documented) assert.ok(registered.has(operation), `${operation} is documented but not served`);
    for (const operation of documented) {
      const [method, path] = operation.split(' ') as [string, string];
      assert.ok(app.hasRoute({ method: method as 'GET', url: toFastifyPath(path) }), `${operation} is not a fastify route`);
    }
  });
});

/** The error answer error-map.ts gives `code` (both for WAL_POISONED: by a full disk, and not). */
function answersOf(code: string): ReturnType<typeof errorAnswer>[] {
  if ((Object.values(errorCodes) as string[]).includes(code)) {
    const details = code === errorCodes.walPoisoned ? [{ cause: 'EIO' }, { cause: 'ENOSPC' }] : [{}];
    return details.map((detail) => errorAnswer(new FermataError(code as ErrorCode, 'x', detail), undefined));
  }
  return [errorAnswer(new HttpProblem(code as HttpErrorCode, 'x'), undefined)];
}

test('every documented error code answers with the status it is documented under, with Retry-After where documented', async () => {
  await withServer({}, async (app) => {
    const doc = await servedDocument(app);
    let checked = 0;
    for (const { method, path, operation } of documentedOperations(doc)) {
      for (const [status, documented] of Object.entries(obj(operation.responses, 'responses'))) {
        if (Number(status) < 400) continue;
        const what = `${method} ${path} ${status}`;
        const answer = deref(doc, documented);
        const schema = deref(doc, obj(obj(answer.content, what)['application/json'], what).schema);
        if (path === '/readyz') continue; // its 503 is the health shape, not an error (checked live below)
        const code = obj(obj(obj(schema.properties, what).error, what).properties, what).code;
        const codes = obj(code, `${what} error.code`).enum as string[];
        assert.ok(Array.isArray(codes) && codes.length > 0, `${what} names no error codes`);
        const retryAfter = 'Retry-After' in (isObject(answer.headers) ? answer.headers : {});
        let anyRetryAfter = false;
        for (const errorCode of codes) {
          const matching = answersOf(errorCode).filter((candidate) => candidate.status === Number(status));
          assert.ok(matching.length > 0, `${what}: ${errorCode} is answered ${answersOf(errorCode).map((a) => a.status).join(' or ')}`);
          for (const candidate of matching) {
            assert.equal(candidate.body.error.code, errorCode);
            if (candidate.retryAfterSeconds !== undefined) {
              anyRetryAfter = true;
              assert.ok(retryAfter, `${what}: ${errorCode} sends Retry-After, undocumented`);
            }
          }
          checked++;
        }
        assert.equal(anyRetryAfter, retryAfter, `${what}: Retry-After documented ${retryAfter}, sent ${anyRetryAfter}`);
      }
    }
    assert.ok(checked >= 30, `only ${checked} codes checked`);
    const post = obj(operationOf(doc, 'POST', '/v1/timers').responses, 'responses');
    assert.deepEqual(Object.keys(post).sort(), ['200', '201', '400', '401', '403', '413', '415', '429', '503', '507']);
  });
});

test('live answers have a documented status, media type and body', async () => {
  await withServer({}, async (app) => {
    const doc = await servedDocument(app);
    const call = async (
      method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD',
      path: string,
      url: string,
      options: { body?: string | Buffer | Uint8Array; type?: string; accept?: string; ifMatch?: string } = {},
    ): Promise<Response> => {
      const response = await app.inject({
        method,
        url,
        headers: {
          ...(options.type === undefined ? {} : { 'content-type': options.type }),
          ...(options.accept === undefined ? {} : { accept: options.accept }),
          ...(options.ifMatch === undefined ? {} : { 'if-match': options.ifMatch }),
        },
        ...(options.body === undefined ? {} : { payload: Buffer.from(options.body) }),
      });
      if (method !== 'HEAD') assertDocumented(doc, method, path, response);
      return response;
    };
    const json = 'application/json';
    const timer = (fields: object): string => JSON.stringify({ delay_ms: 60_000, target, ...fields });

    const added = await call('POST', '/v1/timers', '/v1/timers', { body: timer({ key: 'k1', payload: 'hi', headers: { 'x-a': 'b' }, queue: 'q1' }), type: json });
    assert.equal(added.statusCode, 201);
    const id = String(added.json().id);
    const again = await call('POST', '/v1/timers', '/v1/timers', { body: timer({ key: 'k1' }), type: json });
    assert.deepEqual([again.statusCode, again.json().id, again.json().duplicate], [200, id, true]);
    const viaFireAt = await call('POST', '/v1/timers', '/v1/timers', { body: JSON.stringify({ fire_at: new Date(Date.now() + 86_400_000).toISOString(), target, payload_base64: 'AAE=' }), type: json });
    assert.equal(viaFireAt.statusCode, 201);

    const ndjson = `${timer({ key: 'k1' })}\n\n${timer({})}\n`;
    const batch = await call('POST', '/v1/timers', '/v1/timers', { body: ndjson, type: 'application/x-ndjson' });
    assert.deepEqual(batch.json(), { accepted: 2, duplicates: 1, ids: [id, batch.json().ids[1]], revisions: [1, 1], duplicate_rows: [{ row: 0, state: 'pending', differs: ['payload', 'headers', 'queue'] }] });
    const arrowBody = batchToArrow(batchFromSpecs([{ fireAtMs: Date.now() + 60_000, target, key: 'k1' }, { fireAtMs: Date.now() + 60_000, target }]));
    assert.equal((await call('POST', '/v1/timers', '/v1/timers', { body: arrowBody, type: arrowType })).statusCode, 201);
    const arrowAnswer = await call('POST', '/v1/timers', '/v1/timers', { body: arrowBody, type: arrowType, accept: arrowType });
    assert.equal(arrowAnswer.statusCode, 201);
    const table = tableFromIPC(arrowAnswer.rawPayload);
    const columns = ['`id` (Utf8)', '`duplicate` (Bool)', '`state` (Utf8)', '`differs` (List<Utf8>)', '`revision` (Uint32)'];
    assert.deepEqual(table.schema.fields.map((field) => `\`${field.name}\` (${String(field.type)})`), columns);
    const created = String(obj(obj(operationOf(doc, 'POST', '/v1/timers').responses, 'responses')['201'], '201').description);
    for (const column of columns) assert.ok(created.includes(column), `201 does not describe the Arrow column ${column}`);
    assert.deepEqual([table.getChild('id')?.get(0), table.getChild('duplicate')?.get(0), table.getChild('duplicate')?.get(1)], [id, true, false]);
    const ndjsonArrow = await call('POST', '/v1/timers', '/v1/timers', { body: ndjson, type: 'application/x-ndjson', accept: arrowType });
    assert.equal(String(ndjsonArrow.headers['content-type']), arrowType);

    for (const [body, type] of [
      [JSON.stringify({ target }), json],
      [timer({ surprise: 1 }), json],
      [JSON.stringify({ delay_ms: 1, fire_at: 1, target }), json],
      ['{', json],
      [`${timer({})}\n{"target": 5}\n`, 'application/x-ndjson'],
      ['', arrowType],
      ['not arrow', arrowType],
    ] as const) {
      assert.equal((await call('POST', '/v1/timers', '/v1/timers', { body, type })).statusCode, 400, body);
    }
    assert.equal((await call('POST', '/v1/timers', '/v1/timers', { body: 'x', type: 'text/plain' })).statusCode, 415);
    assert.equal((await call('POST', '/v1/timers', '/v1/timers')).statusCode, 415);
    const huge = timer({ payload: 'x'.repeat(ingestLimits.jsonBodyBytesMax) });
    assert.equal((await call('POST', '/v1/timers', '/v1/timers', { body: huge, type: json })).statusCode, 413);

    const view = await call('GET', '/v1/timers/{id}', `/v1/timers/${id}`);
    assert.deepEqual([view.statusCode, view.json().key, view.json().queue, view.headers.etag], [200, 'k1', 'q1', '"1"']);
    const patch = (body: string, ifMatch?: string): Promise<Response> => call('PATCH', '/v1/timers/{id}', `/v1/timers/${id}`, { body, type: json, ...(ifMatch === undefined ? {} : { ifMatch }) });
    const patched = await patch('{"delay_ms":120000,"queue":"q1"}', '"1"');
    assert.deepEqual([patched.statusCode, patched.json().revision, patched.headers.etag], [200, 2, '"2"']);
    assert.equal((await patch('{"delay_ms":1}', '"1"')).statusCode, 412);
    assert.equal((await patch('{"delay_ms":1}', 'one')).statusCode, 400);
    assert.equal((await patch('{"key":"k2"}')).statusCode, 400);
    assert.equal((await call('PATCH', '/v1/timers/{id}', '/v1/timers/zzzzzzzzzzzzzzzzzzzzzzzz', { body: '{"delay_ms":1}', type: json })).statusCode, 404);
    for (const unknown of ['zzzzzzzzzzzzzzzzzzzzzzzz', 'not-an-id', id.toUpperCase()]) assert.equal((await call('GET', '/v1/timers/{id}', `/v1/timers/${unknown}`)).statusCode, 404);
    assert.equal((await call('DELETE', '/v1/timers/{id}', `/v1/timers/${id}`)).statusCode, 200);
    assert.equal((await call('DELETE', '/v1/timers/{id}', `/v1/timers/${id}`)).statusCode, 200);
    assert.equal((await call('DELETE', '/v1/timers/{id}', '/v1/timers/zzzzzzzzzzzzzzzzzzzzzzzz')).statusCode, 404);
    assert.equal((await call('GET', '/v1/timers/{id}', `/v1/timers/${id}`)).json().state, 'cancelled');
    assert.equal((await patch('{"delay_ms":1}')).statusCode, 409);

    assert.equal((await call('PUT', '/v1/queues/{name}', '/v1/queues/q1', { body: '{"max_attempts":3,"rate_per_s":5}', type: json })).statusCode, 200);
    for (const [url, body] of [
      ['/v1/queues/q1', '{"max_attempts":0}'],
      ['/v1/queues/q1', '{"nope":1}'],
      ['/v1/queues/q1', '[]'],
      ['/v1/queues/-bad', '{}'],
    ] as const) {
      assert.equal((await call('PUT', '/v1/queues/{name}', url, { body, type: json })).statusCode, 400, `${url} ${body}`);
    }
    assert.equal((await call('PUT', '/v1/queues/{name}', '/v1/queues/q1', { body: '{}', type: 'application/x-ndjson' })).statusCode, 415);
    const queues = await call('GET', '/v1/queues', '/v1/queues');
    assert.deepEqual(
      (queues.json().queues as Array<{ name: string }>).map((queue) => queue.name),
      ['default', 'q1'],
    );
    assert.equal((await call('GET', '/v1/queues/{name}', '/v1/queues/q1')).json().max_attempts, 3);
    assert.equal((await call('GET', '/v1/queues/{name}', '/v1/queues/nowhere')).statusCode, 404);
    assert.equal((await call('POST', '/v1/queues/{name}/pause', '/v1/queues/q1/pause')).json().paused, true);
    assert.equal((await call('GET', '/v1/queues/{name}', '/v1/queues/q1')).json().paused, true);
    assert.equal((await call('POST', '/v1/queues/{name}/resume', '/v1/queues/q1/resume')).json().paused, false);
    assert.equal((await call('POST', '/v1/queues/{name}/pause', '/v1/queues/nowhere/pause')).statusCode, 404);
    assert.equal((await call('DELETE', '/v1/queues/{name}', '/v1/queues/nowhere')).statusCode, 404);
    assert.equal((await call('DELETE', '/v1/queues/{name}', '/v1/queues/default')).json().error.code, 'QUEUE_PROTECTED');
    assert.equal((await call('POST', '/v1/timers', '/v1/timers', { body: timer({ queue: 'q2' }), type: json })).statusCode, 201);
    assert.deepEqual((await call('DELETE', '/v1/queues/{name}', '/v1/queues/q2')).json().error.pending, 1);
    assert.deepEqual((await call('DELETE', '/v1/queues/{name}', '/v1/queues/q1')).json(), { name: 'q1', deleted: true });

    assert.equal((await call('GET', '/v1/stats', '/v1/stats')).json().cancelled, 1);
    assert.equal((await call('GET', '/v1/limits', '/v1/limits')).json().batch_rows_max, 100_000);
    const metrics = await call('GET', '/metrics', '/metrics');
    assert.equal(metrics.statusCode, 200);
    const described = String(operationOf(doc, 'GET', '/metrics').description);
    const scraped = [...metrics.body.matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1] as string);
    assert.ok(scraped.length > 0);
    for (const name of scraped) assert.match(described, new RegExp(`\`${name}[{\`]`), `${name} is not described`);
    assert.equal([...described.matchAll(/`fermata_/g)].length, scraped.length, 'the description names a metric /metrics does not have');
    assert.equal((await call('GET', '/healthz', '/healthz')).statusCode, 200);
    assert.equal((await call('GET', '/readyz', '/readyz')).statusCode, 200);
    assert.equal((await call('GET', '/openapi.json', '/openapi.json')).statusCode, 200);
    for (const url of ['/healthz', '/v1/stats', '/openapi.json']) assert.equal((await call('HEAD', url, url)).statusCode, 200, `HEAD ${url}`);
  });
});

test('live overload and a poisoned log: 413, 503 with Retry-After, 507, and /readyz 503 are documented', async () => {
  const capacity = { store: { capacityInitial: 1, capacityMax: 1 }, walLimits: { recordBodyBytesMax: 4_096 } };
  for (const [errno, status] of [
    ['ENOSPC', 507],
    ['EIO', 503],
  ] as const) {
    await withServer({ engine: capacity, fs: new SimFileSystem({ seed: 92 }) }, async (app, fs) => {
      const doc = await servedDocument(app);
      const post = async (fields: object): Promise<Response> => {
        const response = await app.inject({ method: 'POST', url: '/v1/timers', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ delay_ms: 60_000, target, ...fields }) });
        assertDocumented(doc, 'POST', '/v1/timers', response);
        return response;
      };
      const tooLarge = await post({ payload: 'x'.repeat(5_000) });
      assert.deepEqual([tooLarge.statusCode, tooLarge.json().error.code], [413, 'WAL_RECORD_TOO_LARGE']);
      const added = await post({});
      assert.equal(added.statusCode, 201);
      const full = await post({});
      assert.deepEqual([full.statusCode, full.json().error.code, full.headers['retry-after']], [503, 'CAPACITY_FULL', '1']);

      fs.failAfter('datasync', 0, errno);
      const queue = await app.inject({ method: 'PUT', url: '/v1/queues/q', headers: { 'content-type': 'application/json' }, payload: '{}' });
      assertDocumented(doc, 'PUT', '/v1/queues/{name}', queue);
      assert.deepEqual([queue.statusCode, queue.json().error.code], [status, 'WAL_POISONED']);
      const cancel = await app.inject({ method: 'DELETE', url: `/v1/timers/${String(added.json().id)}` });
      assertDocumented(doc, 'DELETE', '/v1/timers/{id}', cancel);
      assert.deepEqual([cancel.statusCode, cancel.json().error.code, cancel.headers['retry-after']], [status, 'WAL_POISONED', '1']);
      const readyz = await app.inject({ method: 'GET', url: '/readyz' });
      assertDocumented(doc, 'GET', '/readyz', readyz);
      assert.equal(readyz.statusCode, 503);
    });
  }
});

test('the documented security is what a server with tokens enforces', async () => {
  await withServer({ tokens: [token] }, async (app) => {
    assert.equal((await app.inject({ method: 'GET', url: '/openapi.json' })).statusCode, 401);
    const doc = await servedDocument(app, { authorization: `Bearer ${token}` });
    let open = 0;
    for (const { method, path, operation } of documentedOperations(doc)) {
      const secured = ((operation.security ?? doc.security) as unknown[]).length > 0;
      const url = path.replace('{id}', '0000000004000001m8vgw5r0').replace('{name}', 'default');
      const bare = await app.inject({ method: method as 'GET', url });
      if (secured) {
        assert.equal(bare.statusCode, 401, `${method} ${path} without a token`);
        assertDocumented(doc, method, path, bare);
      } else {
        open++;
        // The dashboard's files answer 404 where it is not built, or for no such asset: never 401.
        if (path.startsWith('/ui')) assert.notEqual(bare.statusCode, 401, `${method} ${path} is documented open`);
        else assert.equal(bare.statusCode, 200, `${method} ${path} is documented open`);
      }
      // An event stream stays open: its head is what is checked, then it is let go (the close ends it).
      const streams = path === '/v1/events';
      const authorized = await app.inject({ method: method as 'GET', url, headers: { authorization: `Bearer ${token}` }, ...(streams ? { payloadAsStream: true } : {}) });
      assert.notEqual(authorized.statusCode, 401, `${method} ${path} with the token`);
      assertDocumented(doc, method, path, authorized);
      if (streams) authorized.stream().destroy();
    }
    assert.equal(open, 5, '/healthz, /readyz, /v1/limits and the dashboard\'s two routes are the open routes');
  });
});

test('queue config: the documented defaults, ranges and name rule are the engine\'s', async () => {
  await withServer({}, async (app) => {
    const doc = await servedDocument(app);
    const properties = obj(deref(doc, obj(obj(doc.components, 'components').schemas, 'schemas').QueueConfig).properties, 'QueueConfig.properties');
    const put = (name: string, body: unknown): Promise<Response> =>
      app.inject({ method: 'PUT', url: `/v1/queues/${name}`, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
    const defaults = Object.fromEntries(Object.entries(properties).map(([field, schema]) => [field, obj(schema, field).default]));
    const stored = await put('q', {});
    assert.equal(stored.statusCode, 200);
    assert.deepEqual(stored.json(), { name: 'q', ...defaults, paused: false });
    const maxBackoff = obj(properties.max_backoff_ms, 'max_backoff_ms').maximum as number;
    for (const [field, schemaValue] of Object.entries(properties)) {
      const schema = obj(schemaValue, field);
      if (field === 'delivery' || field === 'sink') continue; // not numbers: checked below
      const min = schema.minimum as number;
      const max = schema.maximum as number;
      const nullable = [schema.type].flat().includes('null');
      // Room for either backoff bound to reach its own limits (max_backoff_ms must not be below min_backoff_ms).
      const body = (value: unknown): object => ({ min_backoff_ms: 0, max_backoff_ms: maxBackoff, [field]: value });
      for (const value of [min, max, ...(nullable ? [null] : [])]) {
        const response = await put('q', body(value));
        assert.equal(response.statusCode, 200, `${field} = ${value}: ${response.body}`);
        assert.equal(response.json()[field], value);
      }
      for (const value of [min - 1, max + 1, min + 0.5, '1', ...(nullable ? [] : [null])]) {
        const response = await put('q', body(value));
        assert.deepEqual([response.statusCode, response.json().error.field], [400, field], `${field} = ${JSON.stringify(value)}`);
      }
    }
    // The two fields that are not numbers: every documented delivery mode is taken, an unknown one refused,
    // and "arrow" needs a sink.
    for (const mode of obj(properties.delivery, 'delivery').enum as string[]) {
      const response = await put('q', { delivery: mode, sink: 'https://sink.example/batches' });
      assert.deepEqual([response.statusCode, response.json().delivery], [200, mode]);
    }
    assert.deepEqual((await put('q', { delivery: 'telegram' })).json().error.field, 'delivery');
    assert.deepEqual((await put('q', { delivery: 'arrow', sink: null })).json().error.field, 'sink');
    const name = obj((operationOf(doc, 'PUT', '/v1/queues/{name}').parameters as unknown[])[0], 'name parameter');
    const nameSchema = obj(name.schema, 'name schema');
    const longest = 'a'.repeat(nameSchema.maxLength as number);
    for (const ok of [longest, 'A.b_c-9', '9']) {
      assert.ok(new RegExp(String(nameSchema.pattern)).test(ok));
      assert.equal((await put(ok, {})).statusCode, 200, ok);
    }
    for (const bad of [`${longest}a`, '-a', '.a', 'a%20b', 'a+b']) {
      const response = await put(bad, {});
      assert.deepEqual([response.statusCode, response.json().error.field], [400, 'name'], bad);
      assert.ok(bad.length > longest.length || !new RegExp(String(nameSchema.pattern)).test(decodeURIComponent(bad)), `${bad} fits the documented rule`);
    }
  });
});
