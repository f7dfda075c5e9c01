// Whether this machine's curl exists and speaks HTTP/2, for tests that use it as a real client.
import { execFileSync } from 'node:child_process';

export const curl = (() => {
  try {
    const version = execFileSync('curl', ['--version'], { encoding: 'utf8' });
    return { present: true, http2: /^Features:.*\bHTTP2\b/m.test(version) };
  } catch {
    return { present: false, http2: false };
  }
})();
