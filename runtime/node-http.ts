// node:http, loaded through require rather than an ES import. An ES import of a built-in module
// makes its module facade, which reads every export once; node:http's include lazy getters that
// load undici (fetch's implementation), which fermata does not use from node:http. Imported,
// node:http made every start load and compile undici; decision 0033 has the measurement.
// Everything in fermata takes node:http from here (types may still be imported as types).
import { createRequire } from 'node:module';
import type * as NodeHttp from 'node:http';

export const http: typeof NodeHttp = createRequire(import.meta.url)('node:http') as typeof NodeHttp;
