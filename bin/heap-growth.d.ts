// Types of bin/heap-growth.js (plain JavaScript, so that the `fermata` launcher can run it before any TypeScript is loaded).

export const heapGrowingPercent: number;

/** The V8 flag to set, or undefined when the command line already sets one. */
export function heapGrowthFlag(execArgv?: readonly string[]): string | undefined;

/** The external memory flag to set, or undefined when the command line already sets it or its negation. */
export function externalMemoryFlag(execArgv?: readonly string[]): string | undefined;

/** Sets the heap and external memory growth for this process (and the worker threads it starts); returns the flags set. */
export function tuneHeapGrowth(): string[];
