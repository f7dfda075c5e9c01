// GET /ui: the dashboard (ui/, decision 0024), as ui/build.js left it in dist/ui/: index.html,
// never cached, names the assets under /ui/assets/, whose file names carry a hash of their
// content and so are cached for a year. Public, like /healthz: the files hold no data, and the
// page asks for a token where the API wants one (listen/bearer-auth.ts lets these paths by).
// Every answer carries a Content-Security-Policy that allows the page's own script and style
// sheet and calls to its own origin only, no inline script or style, and no framing.
//
// The files are read once, at the first request (a start does not pay for a page no one may
// open), and kept: a rebuild while the service runs is seen after a restart. Main thread.
import { readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HttpProblem, httpErrorCodes } from '../error-map.ts';
import type { HttpServer } from '../types.ts';

export const uiSecurityHeaders = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
} as const;

const cacheControl = { page: 'no-cache', asset: 'public, max-age=31536000, immutable' } as const;

const contentTypes: Record<string, string> = { '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

// dist/ui/ from the repository's root: this file is three directories down, a bundle chunk one (dist/).
const builtDir = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../../../dist/ui/' : './ui/', import.meta.url));

interface Built {
  readonly page: Buffer;
  readonly assets: ReadonlyMap<string, { readonly body: Buffer; readonly type: string }>;
}

function readBuilt(dir: string): Built | undefined {
  let page: Buffer;
  try {
    page = readFileSync(join(dir, 'index.html'));
  } catch {
    return undefined;
  }
  const assets = new Map<string, { body: Buffer; type: string }>();
  for (const name of readdirSync(join(dir, 'assets'))) {
    const type = contentTypes[extname(name)];
    if (type !== undefined) assets.set(name, { body: readFileSync(join(dir, 'assets', name)), type });
  }
  return { page, assets };
}

export async function uiRoutes(app: HttpServer): Promise<void> {
  let built: Built | undefined;
  const files = (): Built => {
    built ??= readBuilt(builtDir);
    if (built === undefined) throw new HttpProblem(httpErrorCodes.notFound, `the dashboard is not built: \`npm ci\` (or \`node ui/build.js\`) builds it into ${builtDir}`);
    return built;
  };

  app.get('/ui', async (_request, reply) => {
    const body = files().page;
    return reply.headers({ ...uiSecurityHeaders, 'cache-control': cacheControl.page, 'content-type': 'text/html; charset=utf-8' }).send(body);
  });

  app.get<{ Params: { file: string } }>('/ui/assets/:file', async (request, reply) => {
    const asset = files().assets.get(request.params.file);
    if (asset === undefined) throw new HttpProblem(httpErrorCodes.notFound, `the dashboard has no asset ${request.params.file}`);
    return reply.headers({ ...uiSecurityHeaders, 'cache-control': cacheControl.asset, 'content-type': asset.type }).send(asset.body);
  });
}
