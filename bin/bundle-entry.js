// Which module `fermata` starts from: the bundle bin/bundle.js built (dist/main.mjs) while every
// file it was built from is as it was then (size and modification time, dist/inputs.json), else
// the TypeScript sources (cli/main.ts). Checking costs one stat a file, a few milliseconds; the
// bundle saves the start-up far more (decision 0019). FERMATA_SOURCES=1 always takes the sources.
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** The URL of the module whose main() runs the command. */
export function entryModule(root, env = process.env) {
  const sources = new URL('cli/main.ts', root).href;
  if (env.FERMATA_SOURCES === '1') return sources;
  const base = new URL(root).pathname;
  let inputs;
  try {
    inputs = JSON.parse(readFileSync(join(base, 'dist', 'inputs.json'), 'utf8'));
  } catch {
    return sources;
  }
  for (const [file, size, mtimeMs] of inputs) {
    let stat;
    try {
      stat = statSync(join(base, file));
    } catch {
      return sources;
    }
    if (stat.size !== size || stat.mtimeMs !== mtimeMs) return sources;
  }
  return new URL('dist/main.mjs', root).href;
}
