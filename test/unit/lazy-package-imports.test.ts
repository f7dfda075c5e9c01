// A package imported lazily (`await import('pkg')`) is read through its default export: in the
// bundle `npm ci` builds (bin/bundle.js, decision 0019) a dynamic import of a CommonJS package
// has no named exports, only the module object as `default`, while Node's own loader gives both.
// A named export read off such an import works from the sources and fails from the bundle (it
// broke `--flight` and a cluster node's /metrics once), so every such import in the bundled code
// (not bin/, the launcher, which is plain JavaScript run as it is) names `default`.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const productFolders = ['cli', 'cluster', 'dispatch', 'engine', 'ingest', 'loadgen', 'runtime'];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return /\.(ts|js)$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

test('every dynamic import of a package reads its default export, as the bundle gives it', () => {
  const found: string[] = [];
  const wrong: string[] = [];
  for (const file of productFolders.flatMap((folder) => sources(join(root, folder)))) {
    const lines = readFileSync(file, 'utf8').split('\n');
    lines.forEach((line, at) => {
      for (const match of line.matchAll(/import\((['"])([^'"]+)\1\)/g)) {
        const specifier = match[2] as string;
        if (specifier.startsWith('.') || specifier.startsWith('node:')) continue;
        const where = `${relative(root, file)}:${at + 1}`;
        found.push(where);
        if (!/\bdefault\b/.test(line)) wrong.push(`${where}: import('${specifier}') without default`);
      }
    });
  }
  assert.ok(found.length >= 2, `the check sees the lazy package imports (${found.join(', ')})`);
  assert.deepEqual(wrong, []);
});
