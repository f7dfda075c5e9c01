// runtime/garbage-collector.ts and runtime/malloc-trim.ts: after a large spill the service collects its
// garbage and hands the freed pages back to the kernel with glibc's malloc_trim, which also frees
// pages between chunks still in use (a collection alone leaves them resident), and it does so
// without an ExperimentalWarning on stderr for node:ffi.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { mallocTrim } from '../../runtime/malloc-trim.ts';

const child = new URL('../helpers/memory-return-child.ts', import.meta.url).pathname;
const glibc = typeof (process.report.getReport() as { header?: { glibcVersionRuntime?: unknown } }).header?.glibcVersionRuntime === 'string';
const skip = process.platform === 'linux' && glibc ? false : 'malloc_trim is glibc’s (Linux)';

interface ChildReport {
  readonly returned: { collectionMs: number; trimMs?: number; rssBeforeBytes: number; rssAfterBytes: number } | null;
}

async function runChild(): Promise<{ report: ChildReport; stderr: string }> {
  const started = spawn(process.execPath, [child], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let stderr = '';
  started.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  started.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve) => started.on('exit', resolve));
  assert.equal(code, 0, stderr);
  return { report: JSON.parse(out) as ChildReport, stderr };
}

test('freed ArrayBuffers between live ones go back to the kernel, quietly', { skip }, async () => {
  const { report, stderr } = await runChild();
  assert.equal(stderr, '', 'node:ffi is loaded without a warning on stderr');
  const returned = report.returned;
  assert.ok(returned !== null, 'a collection can be had');
  assert.equal(typeof returned.trimMs, 'number', 'malloc_trim is called');
  // 1,024 freed chunks of 96 KiB (96 MiB) lie between live ones: only malloc_trim releases them.
  const releasedBytes = returned.rssBeforeBytes - returned.rssAfterBytes;
  assert.ok(releasedBytes >= 64 * 1024 * 1024, `released ${(releasedBytes / 1e6).toFixed(1)} MB of the 100 MB freed`);
});

test('malloc_trim says whether it released memory', { skip }, () => {
  const trim = mallocTrim();
  assert.ok(trim !== undefined);
  assert.equal(typeof trim(), 'boolean');
});
