// A child process for dispatch-warm-up.test.ts: for each delay given (ms), opens an engine and a
// dispatcher, lets its one worker load, asks it to warm up, and closes the dispatcher that long
// after, mid-warm-up; it says which delay it is at on stdout first. Exits 0 when every close
// completes; a process that aborts (a worker thread terminated under its warm-up's HTTP/2 server
// and sessions) exits by SIGABRT instead, its last line naming the close.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { Dispatcher } from '../../dispatch/dispatcher.ts';
import { Engine, systemClock } from '../../engine/engine.ts';

for (const delayMs of process.argv.slice(2).map(Number)) {
  process.stdout.write(`closing ${delayMs} ms into the warm-up\n`);
  const dataDir = mkdtempSync(join(tmpdir(), 'fermata-close-warming-'));
  const engine = await Engine.open({ dataDir });
  const dispatcher = new Dispatcher({ engine, clock: systemClock, logger: pino({ level: 'silent' }), threads: 1, allowLoopback: true });
  await dispatcher.ready();
  const warming = dispatcher.warmUp([]);
  await sleep(delayMs);
  await dispatcher.close();
  await warming;
  await engine.close();
  rmSync(dataDir, { recursive: true, force: true });
}
