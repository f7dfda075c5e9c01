// Child process for the kill -9 test: appends records to a real WAL as fast as it can and
// prints "seq body" for every append that resolved (was fdatasync'd), until it is killed.
import { Wal } from '../../engine/wal/wal.ts';

const dir = process.argv[2];
const writers = Number(process.argv[3] ?? 64);
if (dir === undefined) throw new Error('usage: wal-appender-child.ts DIR [WRITERS]');

const wal = await Wal.open({ dir, limits: { segmentBytes: 256 * 1024 } });
process.stdout.write(`ready ${wal.lastSeq}\n`);
const encoder = new TextEncoder();

async function writer(id: number): Promise<void> {
  for (let n = 0; ; n++) {
    const text = `${process.pid}:${id}:${n}:`.padEnd(16 + ((id * 7 + n * 13) % 300), 'x');
    const seq = await wal.append(1 + (n % 255), encoder.encode(text));
    process.stdout.write(`${seq} ${text}\n`);
  }
}

await Promise.all(Array.from({ length: writers }, (_, id) => writer(id)));
