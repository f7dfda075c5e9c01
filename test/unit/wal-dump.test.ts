import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { walDump } from '../../cli/wal-dump.ts';
import { Wal } from '../../engine/wal/wal.ts';
import { frameSegment } from '../helpers/wal-image.ts';

test('wal-dump reads segments without changing them and names where a damaged one stops', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fermata-dump-'));
  try {
    const wal = await Wal.open({ dir, limits: { segmentBytes: 4096 } });
    for (let i = 0; i < 60; i++) await wal.append(1, new Uint8Array(100).fill(i));
    await wal.close();
    const lines: string[] = [];
    assert.equal(walDump([dir, '--records'], (line) => lines.push(line)), 0);
    assert.equal(lines.filter((line) => line.startsWith('  seq ')).length, 60);
    assert.ok(lines.some((line) => /0000000001\.wal: \d+ records, ends cleanly/.test(line)));

    writeFileSync(join(dir, '0000000001.wal'), new Uint8Array(40).fill(7), { flag: 'a' });
    lines.length = 0;
    assert.equal(walDump([dir], (line) => lines.push(line)), 1);
    assert.ok(lines.some((line) => /0000000001\.wal: \d+ records, then offset \d+: torn: record body cut short/.test(line)), lines.join('\n'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('wal-dump --records marks the records of an overlapped group', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fermata-dump-'));
  try {
    const framed = frameSegment(1, 1, [[{ bodyBytes: 10 }, { bodyBytes: 20 }], [{ bodyBytes: 5, overlapped: true }, { bodyBytes: 6, overlapped: true }]]);
    writeFileSync(join(dir, '0000000001.wal'), framed.bytes);
    const lines: string[] = [];
    assert.equal(walDump([dir, '--records'], (line) => lines.push(line)), 0);
    const records = lines.filter((line) => line.startsWith('  seq '));
    assert.deepEqual(
      records.map((line) => /^ {2}seq (\d+) type 1 group-index (\d+)( overlapped)? body/.exec(line)?.slice(1)),
      [
        ['1', '0', undefined],
        ['2', '1', undefined],
        ['3', '0', ' overlapped'],
        ['4', '1', ' overlapped'],
      ],
      lines.join('\n'),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
