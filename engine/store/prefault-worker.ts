// The helper thread of prefaulted-buffers.ts: it allocates buffers, writes one byte in every
// page so that the kernel maps them, and transfers them back, so the page faults of fresh
// memory are taken on this thread instead of the engine's. It holds no state of its own: each
// supply sends it one end of a MessageChannel, and every request on that port is answered on it.
import { type MessagePort, parentPort } from 'node:worker_threads';

/** A request for one buffer of `bytes`. */
export interface PrefaultRequest {
  readonly bytes: number;
}

/** The smallest page size a kernel maps: touching one byte in each is touching every page. */
const pageBytes = 4096;

function prefaulted(bytes: number): ArrayBuffer {
  // Uninitialised: the owner only reads what it writes. One write per page makes it resident.
  const memory = Buffer.allocUnsafeSlow(bytes);
  for (let at = 0; at < bytes; at += pageBytes) memory[at] = 0;
  return memory.buffer as ArrayBuffer;
}

function serve(port: MessagePort): void {
  port.on('message', (request: PrefaultRequest) => {
    const buffer = prefaulted(request.bytes);
    port.postMessage(buffer, [buffer]);
  });
}

parentPort?.on('message', (port: MessagePort) => serve(port));
