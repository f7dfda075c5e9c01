// docs/openapi.json, written from the document the service serves at /openapi.json
// (ingest/http/routes/openapi.ts), so the API contract sits in docs/ beside api.md.
// `npm run openapi` rewrites it; `--check` only says whether it is current
// (test/unit/openapi-file.test.ts does the same in process). Nothing in the service imports it.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openApiDocument } from '../ingest/http/routes/openapi.ts';

export const openApiFile = join(import.meta.dirname, '..', 'docs', 'openapi.json');

export function openApiText(): string {
  return `${JSON.stringify(openApiDocument, null, 2)}\n`;
}

if (import.meta.main) {
  const text = openApiText();
  if (process.argv.includes('--check')) {
    const current = readFileSync(openApiFile, 'utf8') === text;
    process.stdout.write(current ? 'docs/openapi.json is current\n' : 'docs/openapi.json is stale: run `npm run openapi`\n');
    process.exitCode = current ? 0 : 1;
  } else {
    writeFileSync(openApiFile, text);
  }
}
