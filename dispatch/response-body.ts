// The first bytes of a target's answer, for a timer whose callback reports them (engine/callbacks.ts:
// `response_base64`). Delivery workers otherwise drain answers unread; this reads one up to a
// bound and drains the rest, so the connection stays reusable. Runs on a delivery worker.
//
//   answer ─► data … data ─┬► bytesMax reached: the rest drained unread ─► the bytes so far
//                          ├► end, close or error                       ─► the bytes so far
//                          └► waitMs passed                             ─► the bytes so far
import type { Readable } from 'node:stream';

/**
 * Resolves with at most `bytesMax` bytes of `body` (an http.IncomingMessage or an HTTP/2 stream
 * whose head has come), whatever happens to it: a body that errors, stalls past `waitMs` or ends
 * early gives what came. It never rejects: the status is the outcome, the body only a report.
 */
export function readResponseBody(body: Readable, bytesMax: number, waitMs: number): Promise<Uint8Array> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      body.off('data', onData);
      // What is left is read and dropped, so an HTTP/1.1 socket goes back to its pool.
      body.resume();
      // A copy of its own (Buffer.concat may hand out a slice of a shared pool), to post to the main thread.
      resolve(new Uint8Array(Buffer.concat(chunks, Math.min(bytes, bytesMax))));
    };
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk);
      bytes += chunk.length;
      if (bytes >= bytesMax) finish();
    };
    const timer = setTimeout(finish, waitMs);
    body.on('data', onData);
    body.once('end', finish);
    body.once('close', finish);
    body.once('error', finish);
  });
}
