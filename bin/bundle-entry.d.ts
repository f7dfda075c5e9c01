// Types of bin/bundle-entry.js (plain JavaScript, run by the `fermata` launcher before any TypeScript is loaded).

/** The URL of the module whose main() runs the command: the bundle while it is fresh, else cli/main.ts. `root` is the project's URL, ending in a slash. */
export function entryModule(root: string | URL, env?: NodeJS.ProcessEnv): string;
