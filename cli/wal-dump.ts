// `fermata wal-dump DIR`: reads a WAL directory without changing it and prints, per segment,
// its header and each record (sequence, type, commit-group index, `overlapped` when its group
// was written while the one before was in flight, body bytes), then the reader's verdict where
// the segment stops: `end`, or `torn`/`corrupt` with the offset and why. The tool an operator
// reaches for when the service refuses to start on a corrupt log.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeFrame, decodeSegmentHeader } from '../engine/wal/decoder.ts';
import { parseSegmentFileName, segmentHeaderBytes } from '../engine/wal/format.ts';

export const walDumpUsage = `Usage: fermata wal-dump DIR [--records]

Reads the WAL segments in DIR (a data directory's wal/ folder) without changing them and prints
each segment's header and how its records end. --records also prints one line per record.
Exit 0 if every segment reads to its end, 1 if any stops at a torn or corrupt frame.
`;

function dumpSegment(path: string, id: number, printRecords: boolean, out: (line: string) => void): boolean {
  const bytes = new Uint8Array(readFileSync(path));
  const header = decodeSegmentHeader(bytes);
  if (header.verdict !== 'ok') {
    out(`${path}: offset 0: ${header.verdict}: ${header.verdict === 'too-new' ? `WAL format version ${header.version}, newer than this build reads` : header.reason}`);
    return false;
  }
  out(`${path}: segment ${header.header.segmentId}, base sequence ${header.header.baseSeq}, ${bytes.length} bytes`);
  if (header.header.segmentId !== id) out(`${path}: header names segment ${header.header.segmentId}, the file name ${id}`);
  let offset = segmentHeaderBytes;
  let records = 0;
  for (let seq = header.header.baseSeq; ; seq++) {
    const frame = decodeFrame(bytes, offset, header.header.segmentId, seq);
    if (frame.verdict === 'end') {
      out(`${path}: ${records} records, ends cleanly at offset ${offset}`);
      return true;
    }
    if (frame.verdict !== 'record') {
      out(`${path}: ${records} records, then offset ${offset}: ${frame.verdict}: ${frame.reason}`);
      return false;
    }
    if (printRecords) out(`  seq ${frame.seq} type ${frame.type} group-index ${frame.seq - frame.groupBaseSeq}${frame.overlapped ? ' overlapped' : ''} body ${frame.body.length} B at offset ${offset}`);
    records++;
    offset = frame.next;
  }
}

export function walDump(argv: string[], out: (line: string) => void = (line) => process.stdout.write(line + '\n')): number {
  const printRecords = argv.includes('--records');
  const positional = argv.filter((arg) => arg !== '--records');
  if (positional.length !== 1 || positional[0]?.startsWith('-')) {
    process.stderr.write(walDumpUsage);
    return positional[0] === '--help' || positional[0] === '-h' ? 0 : 2;
  }
  const dir = positional[0] as string;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (err) {
    process.stderr.write(`fermata wal-dump: cannot read ${dir}: ${(err as Error).message}\n`);
    return 1;
  }
  const segments = names
    .map((name) => ({ name, id: parseSegmentFileName(name) }))
    .filter((segment): segment is { name: string; id: number } => segment.id !== undefined)
    .sort((a, b) => a.id - b.id);
  if (segments.length === 0) out(`${dir}: no WAL segments`);
  let clean = true;
  for (const { name, id } of segments) clean = dumpSegment(join(dir, name), id, printRecords, out) && clean;
  return clean ? 0 : 1;
}
