// The loopback HTTP/2 server a warm-up's made-up deliveries go to (delivery-warm-up.ts), run on
// the main thread by the pool for the length of a warm-up: it reads each POST to its end and
// answers 200. It is not in the worker whose path is warmed because a worker thread torn down
// (process.exit, an uncaught error's exit, a terminate) while an HTTP/2 server of its own reads
// aborts the whole process: node can no longer run the JavaScript that sets up a stream whose
// HEADERS just arrived, and the DATA read after them trips an assertion in its stream code. The
// main thread's loop does not turn while the process exits, and the workers are only clients,
// whose streams their JavaScript made before any byte of them arrived.
import { once } from 'node:events';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';

export interface WarmUpTarget {
  /** http://127.0.0.1:port/warm-up */
  readonly url: string;
  /** Stops listening; its sessions end as the workers close their clients, which each does once its exercise is done. */
  close(): void;
}

export async function startWarmUpTarget(): Promise<WarmUpTarget> {
  const server = http2.createServer();
  server.on('stream', (stream: http2.ServerHttp2Stream) => {
    stream.on('error', ignore);
    stream.once('end', () => stream.respond({ ':status': 200 }, { endStream: true }));
    stream.resume();
  });
  server.on('sessionError', ignore);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  // A session a worker left open must not hold the process up.
  server.unref();
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/warm-up`,
    close: () => server.close(),
  };
}

function ignore(): void {}
