// Started by test/integration/runtime-settings.test.ts: asks bin/runtime-settings.js to start this file again
// with huge pages on and V8's thread pool sized, then prints what the process it ended up in sees.
import { startWithRuntimeSettings } from '../../bin/runtime-settings.js';

startWithRuntimeSettings(import.meta.filename);
process.stdout.write(
  JSON.stringify({ pid: process.pid, tunables: process.env.GLIBC_TUNABLES ?? null, nodeOptions: process.env.NODE_OPTIONS ?? null, argv: process.argv.slice(2), execArgv: process.execArgv }),
);
