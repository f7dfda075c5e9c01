// The "tokens" setting (cli/serve/config-file.ts checkTokens): plain strings keep every scope and
// are named by their place; objects carry a name, scopes and queues; every refusal names the
// token by its place, never by its text.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkTokens } from '../../cli/serve/config-file.ts';
import { UsageError } from '../../cli/serve/errors.ts';

const source = 'config file f.json, "tokens"';

test('plain tokens have every scope; objects the scopes and queues they list', () => {
  assert.deepEqual(checkTokens([' plain-token-000000000 ', { name: 'ci', token: 'object-token-00000000', scopes: ['read'], queues: ['builds'] }, { token: 'unnamed-token-0000000', scopes: ['admin'] }], source), [
    { name: 'token-1', token: 'plain-token-000000000', scopes: ['read', 'write', 'admin'], queues: undefined },
    { name: 'ci', token: 'object-token-00000000', scopes: ['read'], queues: ['builds'] },
    { name: 'token-3', token: 'unnamed-token-0000000', scopes: ['admin'], queues: undefined },
  ]);
});

test('a bad token object is refused naming the token by its place and what is wrong', () => {
  const refused = (entry: unknown, pattern: RegExp): void => {
    assert.throws(() => checkTokens(['first-token-000000000', entry], source), (err: unknown) => err instanceof UsageError && pattern.test(err.message) && !err.message.includes('secret-text'), String(pattern));
  };
  refused({ token: 'secret-text-000000000', scopes: ['root'] }, /token 2 of 2's "scopes" must be a non-empty array of "read", "write", "admin"/);
  refused({ token: 'secret-text-000000000', scopes: [] }, /"scopes" must be a non-empty array/);
  refused({ token: 'secret-text-000000000', scopes: ['read'], queues: [] }, /"queues" must be a non-empty array of queue names/);
  refused({ token: 'secret-text-000000000', scopes: ['read'], role: 'x' }, /unknown key "role"/);
  refused({ scopes: ['read'] }, /token 2 of 2 needs "token", a string/);
  refused({ token: 'short', scopes: ['read'] }, /token 2 of 2 is 5 characters long/);
  refused({ name: 'token-1', token: 'secret-text-000000000', scopes: ['read'] }, /named "token-1", as an earlier one is/);
  refused(7, /neither a string nor an object/);
});
