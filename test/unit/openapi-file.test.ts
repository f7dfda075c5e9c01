// docs/openapi.json is the served document, byte for byte as `npm run openapi` writes it: a change
// to the routes' document that is not written out to docs/ fails here.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { openApiFile, openApiText } from '../../scripts/openapi-json.ts';

test('docs/openapi.json is the document /openapi.json serves (run `npm run openapi` after changing it)', () => {
  assert.equal(readFileSync(openApiFile, 'utf8'), openApiText());
});
