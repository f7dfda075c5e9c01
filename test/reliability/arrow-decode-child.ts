// Decodes one Arrow IPC stream (base64 on stdin) with the service's own decoder, as admitArrow
// does, and prints one line: `accepted N` or `refused MESSAGE`. A child process, so that the
// test that runs it can bound its heap (--max-old-space-size) and its time (a kill timer).
import { batchFromArrow } from '../../engine/batch/arrow-codec.ts';

const chunks: Buffer[] = [];
for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
const body = Buffer.from(Buffer.concat(chunks).toString('latin1'), 'base64');
try {
  process.stdout.write(`accepted ${batchFromArrow(body, Date.now()).rows}\n`);
} catch (err) {
  process.stdout.write(`refused ${err instanceof Error ? err.message : String(err)}\n`);
}
