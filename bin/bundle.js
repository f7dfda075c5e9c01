#!/usr/bin/env node
// Builds the bundle `fermata` starts from: the service's TypeScript and its packages in a few
// ES module files under dist/ (esbuild), so that a start loads and compiles those instead of
// resolving, reading and stripping the types of ~900 files one by one (decision 0019). `npm ci`
// and `npm install` run it (package.json's "prepare"); `node bin/bundle.js` runs it by hand.
// It builds the dashboard too (ui/build.js, dist/ui/).
//
// Beside the bundle it writes dist/inputs.json: every project file the bundle was made of, with
// its size and modification time, and package-lock.json's. bin/bundle-entry.js starts from the
// bundle only while all of them are unchanged; an edited, added or checked-out file makes it
// start from the sources, so the bundle can never run older code than the tree holds.
//
// Plain JavaScript that runs on Node 18 and later: npm runs "prepare" with whatever Node it is
// running on, before the pinned one is of use. A bundle that cannot be built (esbuild missing
// for this platform) is no error: it says so and `fermata` starts from the sources.
import { mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { buildUi } from '../ui/build.js';
import { entryModule } from './bundle-entry.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist');

let esbuild;
try {
  esbuild = await import('esbuild');
} catch (err) {
  console.warn(`bin/bundle.js: no bundle (esbuild cannot be loaded: ${err instanceof Error ? err.message : String(err)}); fermata starts from its sources`);
  process.exit(0);
}

// A bundle as fresh as every file it was made of is kept as it is. `npx fermata` in a checkout
// installs the checkout into npm's cache, which runs "prepare" here again: rebuilding would empty
// dist/ under a running fermata, whose next lazy import of a chunk would then fail. (The
// dashboard's dist/ui/ is built again either way: the service reads it when a page is asked for.)
if (entryModule(pathToFileURL(`${root}/`), {}) === pathToFileURL(join(out, 'main.mjs')).href) {
  console.log('bin/bundle.js: dist/ is as fresh as the files it was built from: kept');
} else {
  await buildBundle();
}

async function buildBundle() {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const result = await esbuild.build({
    absWorkingDir: root,
    // The command and the delivery worker (dispatch/delivery-pool.ts loads it from beside its own chunk).
    entryPoints: { main: 'cli/main.ts', 'delivery-worker': 'dispatch/delivery-worker.ts' },
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node26',
    outdir: out,
    outExtension: { '.js': '.mjs' },
    // piscina starts its workers from a file of its own beside it; @node-rs/crc32 is a native addon;
    // the gRPC reflection and health services (and the loader they share) read .proto files beside their own.
    external: ['piscina', '@node-rs/crc32', '@grpc/proto-loader', '@grpc/reflection', 'grpc-health-check'],
    // Stack traces and logs keep the functions' and classes' names.
    keepNames: true,
    metafile: true,
    logLevel: 'warning',
    // The packages written as CommonJS call require(): give them one in each ES module chunk.
    banner: { js: "import { createRequire as __fermataCreateRequire } from 'node:module'; const require = __fermataCreateRequire(import.meta.url);" },
  });

  const watched = Object.keys(result.metafile.inputs)
    .filter((input) => !input.startsWith('node_modules/') && !input.includes(':'))
    .concat('package-lock.json', 'package.json', 'bin/bundle.js');
  const inputs = watched.map((file) => {
    const stat = statSync(join(root, file));
    return [relative(root, join(root, file)), stat.size, stat.mtimeMs];
  });
  writeFileSync(join(out, 'inputs.json'), JSON.stringify(inputs));
  console.log(`bin/bundle.js: dist/ built from ${Object.keys(result.metafile.inputs).length} files`);
}

// The dashboard's page and assets, dist/ui/ (decision 0024); the service serves them at GET /ui.
const ui = await buildUi(esbuild);
console.log(`bin/bundle.js: dist/ui/ built (${ui.script}, ${ui.style})`);
