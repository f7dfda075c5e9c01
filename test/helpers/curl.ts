// Whether this machine's curl exists and speaks HTTP/2, for tests that use it as a real client
// (a test without it calls toolOrSkip(t, 'curl') from ./tools.ts).
import { execFileSync } from 'node:child_process';
import { toolPath } from './tools.ts';

/** Why a test that needs curl's HTTP/2 cannot run with this curl. */
export const curlWithoutHttp2 = 'this curl is built without HTTP/2';

export const curl = (() => {
  const path = toolPath('curl');
  if (path === undefined) return { present: false, http2: false };
  const version = execFileSync(path, ['--version'], { encoding: 'utf8' });
  return { present: true, http2: /^Features:.*\bHTTP2\b/m.test(version) };
})();
