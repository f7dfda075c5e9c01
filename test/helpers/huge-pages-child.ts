// Started by test/unit/huge-pages.test.ts: asks bin/huge-pages.js to start this file again with
// huge pages on, then prints what the process it ended up in sees.
import { startWithHugePages } from '../../bin/huge-pages.js';

startWithHugePages(import.meta.filename);
process.stdout.write(JSON.stringify({ pid: process.pid, tunables: process.env.GLIBC_TUNABLES ?? null, argv: process.argv.slice(2), execArgv: process.execArgv }));
