// Builds the dashboard (decision 0024): ui/src/main.tsx and what it imports (Preact, uPlot and
// their CSS) into dist/ui/, with esbuild. Every asset's file name carries a hash of its content
// (dist/ui/assets/main-HASH.js, main-HASH.css, and chunk-HASH.js, uPlot, imported lazily), so the service can let browsers keep them for a
// year; dist/ui/index.html, the one file without a hash, names them and is never cached.
//
// bin/bundle.js runs it after the service's bundle (`npm ci`, `npm install`), and the browser
// test runs it before it starts, so the page it drives is the sources' as they are. Plain
// JavaScript for Node 18 and later, like bin/bundle.js; it exports `buildUi` and runs it when
// started as `node ui/build.js`.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Builds dist/ui/ with `esbuild` (the module); answers the asset names index.html refers to. */
export async function buildUi(esbuild) {
  const out = join(root, 'dist', 'ui');
  rmSync(out, { recursive: true, force: true });
  mkdirSync(join(out, 'assets'), { recursive: true });
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: { main: 'ui/src/main.tsx' },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome120', 'firefox120', 'safari17'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: true,
    sourcemap: false,
    // What the page imports lazily (the chart library) is a chunk of its own, loaded after the first numbers are shown.
    splitting: true,
    outdir: join(out, 'assets'),
    entryNames: '[name]-[hash]',
    chunkNames: 'chunk-[hash]',
    assetNames: '[name]-[hash]',
    metafile: true,
    logLevel: 'warning',
  });
  const entry = Object.entries(result.metafile.outputs).find(([, output]) => output.entryPoint === 'ui/src/main.tsx');
  const script = entry === undefined ? undefined : basename(entry[0]);
  const style = entry?.[1].cssBundle === undefined ? undefined : basename(entry[1].cssBundle);
  if (script === undefined || style === undefined) throw new Error(`ui/build.js: esbuild wrote no entry script or no style sheet: ${Object.keys(result.metafile.outputs).join(', ')}`);
  const page = readFileSync(join(root, 'ui', 'index.html'), 'utf8').replace('{{script}}', `/ui/assets/${script}`).replace('{{style}}', `/ui/assets/${style}`);
  writeFileSync(join(out, 'index.html'), page);
  return { script, style };
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const built = await buildUi(await import('esbuild'));
  console.log(`ui/build.js: dist/ui/ built (${built.script}, ${built.style})`);
}
