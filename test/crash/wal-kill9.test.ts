// kill -9 of a real process appending to a real WAL: every append the child reported as
// resolved must be in the log after reopening, with the same bytes, in sequence order.
// (kill -9 keeps the page cache, so this proves the ack/fsync ordering of the process, not
// power-loss durability; test/sim covers power loss.)
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { Wal } from '../../engine/wal/wal.ts';
import { soak } from '../helpers/soak.ts';

const cycles = soak ? 200 : 12;
const childPath = new URL('./wal-appender-child.ts', import.meta.url).pathname;

/** Whether `text` is a whole body as wal-appender-child.ts writes them: `pid:writer:n:` padded with x to a length set by writer and n. */
function isWhole(text: string): boolean {
  const match = /^(\d+):(\d+):(\d+):x*$/.exec(text);
  if (match === null) return false;
  const [prefix, writer, n] = [`${match[1]}:${match[2]}:${match[3]}:`, Number(match[2]), Number(match[3])];
  return text.length === Math.max(prefix.length, 16 + ((writer * 7 + n * 13) % 300));
}

async function runAndKill(dir: string, killAfterMs: number): Promise<Map<number, string>> {
  const child = spawn(process.execPath, [childPath, dir, '64'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const acked = new Map<number, string>();
  const lines = createInterface({ input: child.stdout });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  let timer: NodeJS.Timeout | undefined;
  for await (const line of lines) {
    if (line.startsWith('ready')) {
      timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      continue;
    }
    const space = line.indexOf(' ');
    const text = line.slice(space + 1);
    // The kill can cut the last line short, and readline still hands it over: "324" once read
    // as seq 32 with text "324". Only whole lines (a space, and the text at its full length) count.
    if (space > 0 && isWhole(text)) acked.set(Number(line.slice(0, space)), text);
  }
  clearTimeout(timer);
  await exited;
  return acked;
}

// The soak's 200 cycles took over 10 minutes on a loaded 2-core machine.
test(`kill -9 while appending, ${cycles} cycles: every resolved append survives`, { timeout: soak ? 3_600_000 : 600_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fermata-kill9-'));
  const decoder = new TextDecoder();
  try {
    let totalAcked = 0;
    for (let cycle = 0; cycle < cycles; cycle++) {
      const acked = await runAndKill(dir, 20 + Math.floor(Math.random() * 250));
      totalAcked += acked.size;
      const wal = await Wal.open({ dir, limits: { segmentBytes: 256 * 1024 } });
      try {
        let expectedSeq = wal.firstSeq;
        for await (const record of wal.records()) {
          assert.equal(record.seq, expectedSeq++, 'records come back in sequence without gaps');
          const text = acked.get(record.seq);
          if (text !== undefined) {
            assert.equal(decoder.decode(record.body), text, `record ${record.seq} holds what was appended`);
            acked.delete(record.seq);
          }
        }
        assert.equal(acked.size, 0, `acknowledged appends missing after kill -9: ${[...acked.keys()].slice(0, 5).join(', ')}`);
      } finally {
        await wal.close();
      }
    }
    assert.ok(totalAcked > cycles, 'the child acknowledged appends before being killed');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
