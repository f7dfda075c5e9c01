// Types of bin/runtime-settings.js (plain JavaScript, so that the `fermata` launcher can run it before any TypeScript is loaded).

/** The environment to start again with (huge pages, V8's thread pool), or undefined when the process should go on as it is. */
export function runtimeEnvironment(env?: NodeJS.ProcessEnv, execArgv?: readonly string[], cores?: number): NodeJS.ProcessEnv | undefined;

/** Starts `script` again with the start-up settings it lacks; otherwise returns. */
export function startWithRuntimeSettings(script: string): void;
