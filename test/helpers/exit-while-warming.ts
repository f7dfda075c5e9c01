// A child process for dispatch-warm-up.test.ts, given a data directory and a delay (ms): opens an
// engine and a dispatcher there, lets its one worker load, asks it to warm up, and calls
// process.exit(3) that long after, mid warm-up, as `fermata serve` does on a second stop signal.
// Exits 3; a process that aborts (a worker thread torn down by the exit while an HTTP/2 server
// in it reads) ends by SIGABRT instead.
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { Dispatcher } from '../../dispatch/dispatcher.ts';
import { Engine, systemClock } from '../../engine/engine.ts';

const [dataDir = '', delay = ''] = process.argv.slice(2);
const delayMs = Number(delay);
const engine = await Engine.open({ dataDir });
const dispatcher = new Dispatcher({ engine, clock: systemClock, logger: pino({ level: 'silent' }), threads: 1, allowLoopback: true });
await dispatcher.ready();
void dispatcher.warmUp([]);
await sleep(delayMs);
process.exit(3);
