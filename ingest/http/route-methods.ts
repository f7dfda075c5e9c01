// Which methods the routes serve at a path, for the answer to a request no route takes: a path
// some route serves is answered 405 METHOD_NOT_ALLOWED with `Allow` listing its methods, any
// other 404 ROUTE_NOT_FOUND (server.ts). fastify's router says only "not found", so the server
// records every route here as it is added (its onRoute hook) and asks on a miss, never on a
// request a route takes. Paths are fastify's: static segments and `:param` segments, which
// match any one segment, even an empty one (as fastify's router does: GET /v1/timers/ reaches
// GET /v1/timers/:id). A static route's path is its own resource: the methods at it are that
// route's alone, and a `:param` route fastify would let take it (GET /v1/timers/cancel reaching
// GET /v1/timers/:id) is turned away by the server (isStaticPath). Built and read on the main thread.

interface RoutePattern {
  readonly segments: readonly string[];
  readonly methods: Set<string>;
}

export class RouteMethods {
  readonly #patterns = new Map<string, RoutePattern>();
  /** The paths of routes without a `:param` segment. */
  readonly #staticPaths = new Set<string>();

  /** A route fastify added: `url` as registered (`/v1/timers/:id`), one method or several. */
  add(url: string, method: string | readonly string[]): void {
    let pattern = this.#patterns.get(url);
    if (pattern === undefined) {
      pattern = { segments: url.split('/'), methods: new Set() };
      this.#patterns.set(url, pattern);
      if (!url.includes('/:')) this.#staticPaths.add(url);
    }
    for (const one of typeof method === 'string' ? [method] : method) pattern.methods.add(one.toUpperCase());
  }

  /**
   * The methods served at `path` (without its query), sorted, with HEAD wherever GET is
   * (fastify answers HEAD for every GET route); empty when no route matches the path.
   */
  methodsAt(path: string): string[] {
    const segments = path.split('/');
    const methods = new Set<string>();
    const onlyStatic = this.#staticPaths.has(path);
    for (const [url, pattern] of this.#patterns) {
      if (onlyStatic ? url !== path : !matches(pattern.segments, segments)) continue;
      for (const method of pattern.methods) methods.add(method);
    }
    if (methods.has('GET')) methods.add('HEAD');
    return [...methods].sort();
  }

  /** Whether a static route serves `path` (without its query): no `:param` route may take it. */
  isStaticPath(path: string): boolean {
    return this.#staticPaths.has(path);
  }
}

function matches(pattern: readonly string[], segments: readonly string[]): boolean {
  if (pattern.length !== segments.length) return false;
  for (let i = 0; i < pattern.length; i++) {
    const expected = pattern[i] as string;
    const actual = segments[i] as string;
    if (!expected.startsWith(':') && expected !== actual) return false;
  }
  return true;
}
