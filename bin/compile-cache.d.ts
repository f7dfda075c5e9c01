// Types of bin/compile-cache.js (plain JavaScript, so that the `fermata` launcher can run it before any TypeScript is loaded).
import type { EnableCompileCacheResult } from 'node:module';

/** Turns the cache on for this process and the worker threads it starts; Node's result, or undefined where there is none. */
export function enableCompileCache(env?: NodeJS.ProcessEnv): EnableCompileCacheResult | undefined;
