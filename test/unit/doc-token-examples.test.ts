// Every bearer token the README, docs/ and `fermata serve --help` show as an example is one the
// service takes (at least tokenLengthMin characters, no spaces), so a newcomer who copies one
// gets a service, not a refusal. Placeholders ("…", "<token>") are not examples.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { tokenLengthMin } from '../../ingest/http/listen/bearer-auth.ts';

const root = new URL('../../', import.meta.url);
const documents = ['README.md', 'cli/serve/command.ts', ...readdirSync(new URL('docs/', root)).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)];
const placeholder = /^(?:…|<token>|\$\{?\w+\}?)$/;

/** The tokens a text shows: FERMATA_TOKENS=a,b, "tokens": ["a", …], authorization: Bearer a. */
function tokenExamples(text: string): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(/FERMATA_TOKENS=([^\s`)'"]+)/g)) found.push(...(match[1] as string).split(','));
  for (const match of text.matchAll(/"tokens":\s*\[/g)) {
    const list = bracketed(text, (match.index as number) + match[0].length);
    // A token is a plain string of the list, or an object's "token" (its name, scopes and queues are not tokens).
    for (const token of list.matchAll(/"token":\s*"([^"]*)"/g)) found.push(token[1] as string);
    for (const token of list.replace(/\{[^}]*\}/g, '').matchAll(/"([^"]*)"/g)) found.push(token[1] as string);
  }
  for (const match of text.matchAll(/authorization: Bearer ([^\s`'"]+)/gi)) found.push(match[1] as string);
  return found.filter((token) => !placeholder.test(token));
}

/** The text from `start` to the `]` that closes the list opened just before it. */
function bracketed(text: string, start: number): string {
  let depth = 1;
  for (let at = start; at < text.length; at++) {
    if (text[at] === '[') depth++;
    else if (text[at] === ']' && --depth === 0) return text.slice(start, at);
  }
  return text.slice(start);
}

test('every bearer token shown in the README, docs/ and serve --help is long enough to be taken', () => {
  const shown = documents.flatMap((document) => tokenExamples(readFileSync(new URL(document, root), 'utf8')).map((token) => ({ document, token })));
  assert.ok(shown.length > 0, 'the documents show at least one token');
  for (const { document, token } of shown) {
    assert.ok(token.length >= tokenLengthMin && !/\s/.test(token), `${document} shows the token "${token}": shorter than ${tokenLengthMin} characters`);
  }
});
