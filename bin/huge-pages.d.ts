// Types of bin/huge-pages.js (plain JavaScript, so that the `fermata` launcher can run it before any TypeScript is loaded).

/** The environment to start again with, or undefined when the process should go on as it is. */
export function hugePagesEnvironment(env?: NodeJS.ProcessEnv): NodeJS.ProcessEnv | undefined;
