// Where the tests find the files committed under test/fixtures/, so a clone of the repository
// tests on its own. Read-only data, loaded by whichever test thread asks.

/**
 * Apache Arrow's IPC stream test files (malformed OSS-Fuzz inputs, foreign schemas, LZ4/ZSTD
 * bodies): `malformed/`, `valid/` and `compressed/` under this folder. test/fixtures/arrow-ipc/README.md
 * says where they come from.
 */
export const arrowIpcTestData = new URL('../fixtures/arrow-ipc/', import.meta.url);
