// Bug B1 (docs/reliability.md), found by test/reliability/ingest-fuzz-arrow.test.ts: a small
// hostile Arrow IPC stream makes the service's decoder (engine/batch/arrow-codec.ts, which runs
// apache-arrow's tableFromIPC on the main thread inside admitArrow) run for minutes or fill the
// heap until the process aborts. apache-arrow trusts the vector lengths written inside the
// stream's flatbuffers (a schema's field and children counts, custom metadata), so ~1.4 KB can
// ask for millions of Field objects. In the service that blocks every request meanwhile and can
// kill the process: one request, no authentication needed on a loopback default.
//
// Each stream here is decoded in a child process with a 256 MB heap and a 10 s kill timer; it
// must be refused (or accepted) within those bounds. The stream bytes are the fuzzer's cases,
// kept whole so they reproduce without fast-check:
//
//   node --test test/reliability/arrow-decode-bounds.test.ts
//
// The control is a valid stream; the three cases are B1's regressions (fixed: the message
// frames are checked before apache-arrow reads them, engine/batch/arrow-message.ts).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { batchToArrow } from '../helpers/arrow.ts';

const bounds = { heapMb: 256, timeMs: 10_000 } as const;
const childPath = new URL('./arrow-decode-child.ts', import.meta.url).pathname;

interface Decoded {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly line: string;
  readonly killedForTime: boolean;
}

function decodeInChild(base64: string): Promise<Decoded> {
  const child = spawn(process.execPath, [`--max-old-space-size=${bounds.heapMb}`, childPath], { stdio: ['pipe', 'pipe', 'ignore'] });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stdin.end(base64);
  let killedForTime = false;
  const timer = setTimeout(() => {
    killedForTime = true;
    child.kill('SIGKILL');
  }, bounds.timeMs);
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, line: output.trim(), killedForTime });
    });
  });
}

function assertBounded(decoded: Decoded): void {
  assert.equal(decoded.killedForTime, false, `still decoding after ${bounds.timeMs} ms`);
  assert.equal(decoded.code, 0, `the decoder died (exit ${decoded.code}, signal ${decoded.signal}; a ${bounds.heapMb} MB heap)`);
  assert.match(decoded.line, /^(accepted \d+|refused .+)$/);
}

test(`control: a valid timer stream decodes within ${bounds.heapMb} MB and ${bounds.timeMs / 1000} s`, { timeout: 30_000 }, async () => {
  const ipc = batchToArrow(batchFromSpecs([{ fireAtMs: Date.UTC(2033, 0, 1), target: 'http://127.0.0.1:9/x', payload: 'p' }]));
  const decoded = await decodeInChild(Buffer.from(ipc).toString('base64'));
  assertBounded(decoded);
  assert.equal(decoded.line, 'accepted 1');
});

const hostile: ReadonlyArray<{ readonly name: string; readonly what: string; readonly base64: string }> = [
  {
    name: 'fuzz case 162',
    what: 'fills over 1 GB of heap in about 5 s, then refuses',
    base64:
      'iAIAABQAAACROWcAAAAKAAwABgAFAAgACgAAAAABAwAEAAAA1P3//wQAAAABAAAACAIAAJhBAAA0Ad3/gQAAAAQAAAASfv//AIDxA2gAAEA8AAAACAAAAAD/' +
      '/wAAoP//IgYA/QCAaWN0K+r//w8AAAAUAAAAIAAATwAACgA3AAAAAAAAAAD/AAB6DxwBAAAADAAAANkAAAAAAAAAPNj//wAAAAEFAQBkAAAAAGh0ZW0AAAAA' +
      'AGUAEgBuY29bZWQvAAAAAAAAAIM+MQAAEAAUAAgAAwAAAA8AAAAAAAAAAAAAAAENcAAAAAAAAABEAAABAQD/AAgAAP9e/v//QP///wAAAQREAAAAPAgAABQA' +
      'AAAwAAAABAAKBBQADAAIAAgACgAAAAAAfzgMAAAAAAAAAAD9//8s/v///3oAARATAAAAH/////////8AQwAAdGVtAI6Ojo6Ojo6Ojo6Ojo6Ojo6Ojo6Ojo6O' +
      'jo6Ojo6Ojo6Ojo6Ojo6Ojo6Ojo6Ojo6OjhgADAAIAAfuifwAAAAAAAlAFwAAAQAAAJ8AAAAAAABE////ACABBTwALgA0AAAAAAAAAAAXAAAIABAIBAAAAAgA' +
      'ABAMAAAAAAAQAAAA/wAQAAAAAAD/AAkAAEsRAAAAAf3//wAAAAADAAAAXQAsAgAAAAAAAAAAAwAAAAIVABAI//MAZm9vYmELYGFAAGJhegAAAAAAAAD3////' +
      'sAAAABQAABYyAAAAEAAYAAAABgAHAAwAEAAUABAAAAAAAOgJ6CAdADgAAAAQAAAAKAAAAAgATQAAAAQACAAAAAwAF886ed/JAAAIAAohCAAbAAgAAAAAAAAA' +
      'QAAAAAAAAAAbAAAAAAAAAAWAAABkaWN0MAAAAf////+oAAAAFAAAAAAAAAAMABQABgAFAAgADAAMAAAAAAIDABQAAAAgAAAAAAAAAAgACgAAAAQACAAAABAA' +
      'AAAAAAoAGAAAACAACAAIAAAATAAAABAAAAADABr8AAAAAAAAAAADAAAADwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAQAAAAAAAQAAAAAAAAAAkAAEAAAAAA' +
      'AAAAAAEAAAADAAAAAAAAAAAAAAAAAAAAAwAAAAYAIAAIAAAAZm9vYmELYmFhcmJhegAAAAAAAAD/////sAAAABQAAAAAAAAADAAUAAYABQAIAAwADAAAAAAC' +
      'AwAUAAAAIAAAAAAAAAByABIBAAAEAAgAAAAYAAAAAAAAAAABAAAAAAoAGAAoAAAACAAkAAAATAAAABAAAAADAAAAAAAAAAAAAAADAAAAAAAAAAAAAAAAAAAA' +
      'AAAAAAAAAAAAAAAAAAAQAAAAAAB//wAAAAAAAAkAAAAAAAAAAAAAAAEAAAADAAD//////////////////////////////////////////2F6EAAIAAAAAP//' +
      '//+wAAAAFAAAAAAAAAAMABQABgAFAAgADAAMAAAAAAIDABQAAAAgAAAAAAAAAH4AAAQAAAQACAAAABgAAAADABQAFABGAAAACgAYAAAABAAIAAoAAABMAAAA' +
      'EAAAAAMAAAACAAAAAAAAAAMAAAAAAFkAAAAAAAAAAAAAAAAAAAAAAAAAAAAPAAAAAAAAABAAAAAAAAAACQAAAAAAAAAA//MAAQAAAAAAAAAQAAAAAAAAAAAA' +
      'AIAAAAAADAAAAAAAAABlbnRyaWlzAAIAAABmNAAAAAD/AGAAAAAQAAAA+CgKAAwABgAGAAgACgAAAI4pAwAMAAAACAAIAAAABAAIAAAABAAAAAMAAAAAAAAA' +
      'AAAAAAAAAAAAAAAAYQtiYXoAAAgAAAAA/////7AAAAAUAAAAAAAAAAwAFAA=',
  },
  {
    name: 'fuzz case 235',
    what: 'keeps the decoder busy for minutes',
    base64:
      'KAEAABAAAAAgIAoAICAgAAUACAAKAAAAIAEgIBAAAAAgIAoAICAgAAQACAAKAAAADP///38AAAAAAAAAAQAAAAQAAAC8////ICAgECAAAAAQAAAABAAAAAEA' +
      'AAAIAAAAZv///5T///8gICAOnAAAABQAAAAEAAAAAQAAABwAAAAgICAgjP///xAAICAIACAABwAMAAAAEAAQAAAAIP//CiQAAAAUAAAABAAAAAAAAAAgACAg' +
      'KAAwAAgAAAAgICAgICAgIAUAAAAgICBgIAAAICAgICAgICD/ICAgIAAgACAAAAAgICAgICAgIAcAAAAAICAg/yAgACAgICAgICAgICAgICAgICAgICAg////' +
      '/yABAAAUAAAAICAgICAAICAGAAUACAAMAAwAAAAgAwQAGAAAAJAAAAAAAAAAICAKACAgDAAEAAgACgAAAJwAAAAQAAAABwAAEAAAAAAgICAgCAAAACAgICAg' +
      'ICAgICAgICAgICAgICAgICAgICAgICAgIP8gIP//ICAgICAgICAgICAgICAgICAgICAgICAg//8gICAAAAAAAAAAACAg/zD/ICAgICAgICAgICAgICAgICAg' +
      'IAAAAAAgICAgICAg/yD///8gICAgICD/ICAg//////8gICAgIAQAAAAHAAAQAAAAAAAAAAAAAAAAAAAAAAAAAAAgICD/ICAgIBIAAAAAAAAAAAAAAAAAAAAg' +
      'ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAg' +
      'ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICDxICAgICAgICAgICAgICAgICAgICAgICAgICAg',
  },
  {
    name: 'fuzz case 318',
    what: 'fills a 4 GB heap in about 66 s: the process aborts',
    base64:
      '/////8ABAAAUAAAAAAAAAAAACgAQAA4ABwAIAAoAAAAAAAABCAAAAAAABADY/v//BAAAAAYAAABQAQAA6AAAAIQAAABYAAAALAAAAAQAAADY/v//EAAAABQA' +
      'AAAAAAAFEAAAAAMAAABrZXkAAAAAACT////8/v//EAAAABgAAAAAAAAFFAAAAAcAAABoZWFkZXJzAAAAAABM////JP///xAAAAAYAAAAAAAABBQAAAAHAAAA' +
      'cGF5bG9hZAAAAAAAdP///7D///8wAAAAEAAAABgAAAAAAAAFFAAAAAUAAABxdWV1ZQAAAAAAAACg////CAAQAAgABAAIAAAADAAAAAEAAAAAAAAApP///wAA' +
      'AAEgAAAAEAAYAAgAAAATABQABAAMABAAAAA0AAAAEAAAABgAAAAAAAAFGAAAAAYAAAB0YXJnZXQAAAAAAAAEAAQABAAAAAgACAAAAAQACAAAAAwAAAAIAAwA' +
      'CAAHAAgAAAAAAAABIAAAABAAFAAEAAAADwAQAAAACAAQAAAAEAAAABgAAAAAAAAKHAAAAAcAAABmaXJlX2F0AAAAAAAIAAwACgAEAAgAAAAIAAAAAAABAAMA' +
      'AABVVEMA/////7AAAAAUAAAAAAAAAAwAHAAaABMAFAAEAAwAAAAoAAAAAAAAAAAAAAAAAAACEAAAAAAABAAIAAoAAAAEAAgAAAAQAAAAAAAKABgADAAIAAQA' +
      'CgAAABQAAABIAAAAAQAAAAAAAAAAAAAAAwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAgAAAAAAAAACAAAAAAAAAAgAAAAAAAAAAAAAAABAAAAAQAAAAAA' +
      'AAAAAAAAAAAAAAAAAAAaAAAAaHR0cDovLzEyNy4wLjAuMTo5L2Fycm93LzAAAAAAAAD/////uAAAABQAAAAAAAAADAAcABoAEwAUAAQADAAAABAAAAAAAAAA' +
      'AAAAAAAAAAIQAAAAAAAEAAgAEgAIAAQACAAAABgAAAABAAAAAAAAAAAACgAYAAwACAAEAAoAAAAUAAAASAAAAAEAAAAAAAAAAAAAAAMAAAgAAAAAAAAAAAAA' +
      'AAAAAAAAAAAAAAAAAAAIAAAAAAAAAAgAAAAAAAAACAAAAAAAAAAAAAAAAQAAAAEAAAAAAAAAAAAAAAAAAAAAAAAABAAAAGZ1enoAAAAA/////6gBAAAUAAAA' +
      'AAAAAAwAFgAUAA8AEAAEAAwAAABgAAAAAAAAAAAAAAMQAAAABAAKABgADAAIAAQACgAAABQAAAAIAQAAAQAAAAAAAAAAAAAADwAAAAAAAAAAAAAAAAAAAAAA' +
      'AAAAAAAAAAAAAAgAAAAAAAAACAAAAAAAAAAAAAAAAAAAAAgAAAAAAAAACAAAAAAAAAAQAAAAAAAAAAAAAAAAAAAAEAAAAAAAAAAIAAAAAAAAABgAAAAAAAAA' +
      'AAAAAAAAAAAYAAAAAAAAAAgAAAAAAAAAIAAAAAAAAAAQAAAAAAAAADAAAAAAAAAAAAAAAAAAAAAwAAAAAAAAAAgAAAAAAAAAOAAAAAAAAAAQAAAAAAAAAEgA' +
      'AAAAAAAAAAAAAAAAAABIAAAAAAAAAAgAAAAAAAAAUAAAAAAAAAAQAAAAAAAAAAAAAAAGAAAAAQAAAAAAAAAAAAAAAAAAAAEAAAAAAAAAAAAAAAAAAAABAAAA' +
      'AAAAAAAAAAAAAAAAAQAAAAAAAAAAAAAAAAAAAAEAAAAAAAAAAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAJT/5s4BAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAkA' +
      'AABwYXlsb2FkIDAAAAAAAAAAAAAAAA0AAAB7Ingtcm93IjoiMCJ9AAAAAAAAAAwAAABhcnJvdy1zZWVkLTAAAAAA/////wAAAAA=',
  },
];

for (const stream of hostile) {
  test(`B1 ${stream.name} (${stream.what}): refused within ${bounds.heapMb} MB and ${bounds.timeMs / 1000} s`, { timeout: 30_000 }, async () => {
    assertBounded(await decodeInChild(stream.base64));
  });
}
