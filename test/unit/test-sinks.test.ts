// The test sinks themselves: a request cut short by its sender (a service killed mid-body) is
// no delivery, so the kill -9 ledger never reads a truncated payload as a timer never sent.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { startH2Sink } from '../helpers/sinks.ts';

test('the HTTP/2 sink records a whole request, and not one whose sender died mid-body', async () => {
  const sink = await startH2Sink();
  try {
    const cut = http2.connect(sink.url);
    cut.on('error', () => undefined);
    await once(cut, 'connect');
    const partial = cut.request({ ':method': 'POST', ':path': '/cut', 'content-length': '10' });
    partial.on('error', () => undefined);
    partial.write('abc');
    await sleep(100);
    cut.socket.destroy();

    const whole = http2.connect(sink.url);
    const request = whole.request({ ':method': 'POST', ':path': '/whole' });
    request.end('payload');
    const [headers] = (await once(request, 'response')) as [http2.IncomingHttpHeaders];
    assert.equal(headers[':status'], 200);
    request.resume();
    await once(request, 'end');
    whole.close();
    await sleep(100);
    assert.deepEqual(
      sink.requests.map((seen) => [seen.path, seen.body.toString('utf8')]),
      [['/whole', 'payload']],
    );
  } finally {
    await sink.close();
  }
});
