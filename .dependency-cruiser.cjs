// The import rules `npm test` holds the tree to (`npm run lint:deps`): no import cycle in the
// product code (everything but bench/ and test/), no product module importing bench/ or test/,
// and nothing in engine/ importing the transports and the command that are built on it.
// Type-only imports count: a cycle of types still ties the modules' meanings together, and it
// turns into a runtime cycle the day one of the imports gains a value.
//
// TypeScript 7.0 has no JS compiler API, so dependency-cruiser parses with @swc/core, which
// reads every import, `import type` included (tagged "type-only", counted all the same). The
// hand-written .d.ts files beside bin/'s JavaScript are left out: swc does not parse bodiless
// declarations, and they import nothing the .js files do not.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Product modules import each other in a cycle: move what both need into a module of its own.',
      from: { pathNot: '^(bench|test)/' },
      to: { circular: true },
    },
    {
      name: 'no-product-to-bench-or-test',
      severity: 'error',
      comment: 'The product imports nothing from bench/ or test/: what both need belongs in the product tree.',
      from: { pathNot: '^(bench|test)/' },
      to: { path: '^(bench|test)/' },
    },
    {
      name: 'engine-knows-no-transport',
      severity: 'error',
      comment: 'The engine is transport-free (ports and adapters): ingest, dispatch and the command depend on it, never the reverse.',
      from: { path: '^engine/' },
      to: { path: '^(ingest|dispatch|cli|runtime|loadgen)/' },
    },
    {
      name: 'engine-knows-no-cluster',
      severity: 'error',
      comment: 'Cluster mode is built on the engine: the engine (its PostgreSQL log included) reaches no cluster/ module; what both need lives in engine/.',
      from: { path: '^engine/' },
      to: { path: '^cluster/' },
    },
    {
      name: 'cluster-knows-no-command',
      severity: 'error',
      comment: 'cluster/ is a library the command uses: it does not import the command.',
      from: { path: '^cluster/' },
      to: { path: '^cli/' },
    },
  ],
  options: {
    parser: 'swc',
    doNotFollow: { path: 'node_modules' },
    exclude: { path: ['^(node_modules|test/fixtures)/', '\\.d\\.ts$'] },
    moduleSystems: ['es6', 'cjs'],
  },
};
