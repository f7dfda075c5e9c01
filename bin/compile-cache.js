// Node's module compile cache for what `fermata` loads, turned on before anything else is.
//
// fermata's sources are TypeScript that Node strips of its types as it loads each file, and the
// service's graph is a few hundred of them and twice as many files of its packages. Without a
// cache every start strips each file again (swc, compiled to WebAssembly) and compiles it from
// source, a large part of the main thread's way to "listening". Node can keep both results on disk,
// keyed by each file's contents, Node's version and V8's flags (module.enableCompileCache:
// https://nodejs.org/api/module.html#module-compile-cache): a start whose files are unchanged
// reads the stripped text and V8's code instead of making them. The first start after an install
// or an upgrade makes the entries (and writes them when the process exits, or when
// flushCompileCache is called); a changed file misses on its own entry only.
//
// The directory is Node's: NODE_COMPILE_CACHE when set, else node-compile-cache in the system's
// temporary directory. NODE_DISABLE_COMPILE_CACHE=1 turns it off (Node's own switch). A cache
// that cannot be had (a read-only or full disk) is no error: Node says so in the result and the
// process loads as it would without one. The directory is put in NODE_COMPILE_CACHE for the
// worker threads (they read it when they start; delivery workers load their own graph).
import module from 'node:module';

/** Turns the cache on for this process and the worker threads it starts; Node's result, or undefined where there is none. */
export function enableCompileCache(env = process.env) {
  if (typeof module.enableCompileCache !== 'function') return undefined;
  const result = module.enableCompileCache();
  if (result.directory !== undefined) env.NODE_COMPILE_CACHE ??= result.directory;
  return result;
}
