// Types of bin/v8-pool.js (plain JavaScript, so that the `fermata` launcher can run it before any TypeScript is loaded).

/** Node's own default size of V8's thread pool. */
export const nodeV8PoolSize: number;

/** The NODE_OPTIONS entry to start with, or undefined when Node's default fits or a size is set already. */
export function v8PoolSizeOption(env?: NodeJS.ProcessEnv, execArgv?: readonly string[], cores?: number): string | undefined;
