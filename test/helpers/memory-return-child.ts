// Started by test/integration/memory-return.test.ts: fragments malloc's heap with ArrayBuffers (every
// other one kept), drops the rest, returns memory with runtime/garbage-collector.ts, and prints what
// that did as JSON. A process of its own, so that its heap holds nothing else.
import { memoryReturn } from '../../runtime/garbage-collector.ts';

const chunkBytes = 96 * 1024; // under glibc's default mmap threshold (128 KiB): from the heap
const chunks = 2048;
const kept: Uint8Array[] = [];
let dropped: Uint8Array[] = [];
for (let i = 0; i < chunks; i++) (i % 2 === 0 ? kept : dropped).push(new Uint8Array(chunkBytes).fill(i & 0xff));
dropped = [];
const returnMemory = memoryReturn();
const returned = returnMemory === undefined ? null : returnMemory(true);
process.stdout.write(JSON.stringify({ returned, kept: kept.length }));
