// The launcher starts from the bundle only while every file it was built from is unchanged
// (bin/bundle-entry.js): a stale bundle must never run older code than the tree holds.
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { entryModule } from '../../bin/bundle-entry.js';
import { testScratch } from '../helpers/scratch.ts';

const scratch = testScratch('fermata-bundle-entry');

function project(): { dir: string; root: string; bundle: string; sources: string; source: string } {
  const dir = scratch.tempDir('project');
  mkdirSync(join(dir, 'dist'));
  mkdirSync(join(dir, 'engine'));
  const source = join(dir, 'engine', 'engine.ts');
  writeFileSync(source, 'export const a = 1;\n');
  const stat = statSync(source);
  writeFileSync(join(dir, 'dist', 'inputs.json'), JSON.stringify([['engine/engine.ts', stat.size, stat.mtimeMs]]));
  const root = pathToFileURL(`${dir}/`).href;
  return { dir, root, source, bundle: new URL('dist/main.mjs', root).href, sources: new URL('cli/main.ts', root).href };
}

test('a bundle whose inputs are unchanged is started', () => {
  const { root, bundle } = project();
  assert.equal(entryModule(root, {}), bundle);
});

test('an edited input (size or modification time) sends the start to the sources', () => {
  const resized = project();
  writeFileSync(resized.source, 'export const a = 12;\n');
  assert.equal(entryModule(resized.root, {}), resized.sources);

  const touched = project();
  const later = new Date(statSync(touched.source).mtimeMs + 5_000);
  utimesSync(touched.source, later, later);
  assert.equal(entryModule(touched.root, {}), touched.sources);
});

test('a removed input, no bundle, or FERMATA_SOURCES=1 start from the sources', () => {
  const removed = project();
  rmSync(removed.source);
  assert.equal(entryModule(removed.root, {}), removed.sources);

  const unbuilt = project();
  rmSync(join(unbuilt.dir, 'dist'), { recursive: true });
  assert.equal(entryModule(unbuilt.root, {}), unbuilt.sources);

  const asked = project();
  assert.equal(entryModule(asked.root, { FERMATA_SOURCES: '1' }), asked.sources);
});
