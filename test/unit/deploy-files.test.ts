// deploy/: the systemd unit passes `systemd-analyze verify` (skipped, with the reason, where the
// program is missing: it is no CI tool), and the container image's Dockerfile, which no test
// builds, keeps what docs/operations.md promises: a Node 22 or later base, npm ci, an
// unprivileged user, the data directory as a volume that FERMATA_DATA names, and a health check
// on /healthz at the port FERMATA_LISTEN names, which the service serves without a token.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

const read = (name: string): string => readFileSync(new URL(`../../deploy/${name}`, import.meta.url), 'utf8');

test('deploy/fermata.service passes systemd-analyze verify', (t) => {
  const unit = read('fermata.service');
  assert.match(unit, /^ExecStart=\/usr\/bin\/node \/opt\/fermata\/bin\/fermata\.js serve /m);
  const probe = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
  if (probe.error !== undefined) {
    t.skip('systemd-analyze is not installed (Debian package systemd)');
    return;
  }
  // verify checks that the program exists: this machine's Node stands in for /usr/bin/node.
  const dir = mkdtempSync(join(tmpdir(), 'fermata-unit-'));
  try {
    const path = join(dir, 'fermata.service');
    writeFileSync(path, unit.replace('/usr/bin/node', process.execPath));
    const result = spawnSync('systemd-analyze', ['verify', path], { encoding: 'utf8', timeout: 30_000 });
    const complaints = `${result.stdout}${result.stderr}`.split('\n').filter((line) => line.includes('fermata.service'));
    assert.equal(result.status, 0, result.stderr);
    assert.deepEqual(complaints, [], 'no warning about the unit');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('deploy/Dockerfile: Node 22+ base, npm ci, an unprivileged user, the data volume, a health check on /healthz', () => {
  const dockerfile = read('Dockerfile');
  const from = /^FROM (?:--platform=\S+ )?node:(\d+)\S*$/m.exec(dockerfile);
  assert.ok(from !== null && Number(from[1]) >= 22, 'a node:22 or later base');
  assert.match(dockerfile, /^RUN npm ci\b/m);
  const user = /^USER (\S+)$/m.exec(dockerfile);
  assert.ok(user !== null && !['root', '0'].includes(user[1] as string), 'runs as an unprivileged user');
  assert.ok(dockerfile.indexOf('USER ') > dockerfile.indexOf('RUN npm ci'), 'the user is set after the install');
  const data = /FERMATA_DATA=(\S+)/.exec(dockerfile)?.[1];
  assert.ok(data !== undefined && dockerfile.includes(`VOLUME ["${data}"]`), 'FERMATA_DATA is the volume');
  const port = /FERMATA_LISTEN=[^\s:]+:(\d+)/.exec(dockerfile)?.[1];
  assert.ok(port !== undefined && new RegExp(`^EXPOSE ${port}$`, 'm').test(dockerfile), 'the port FERMATA_LISTEN names is exposed');
  assert.match(dockerfile, /^HEALTHCHECK .*\n\s+CMD .*process\.env\.FERMATA_LISTEN.*\/healthz/m);
  assert.match(dockerfile, /^CMD \["node", "bin\/fermata\.js", "serve"\]$/m);
  assert.match(read('Dockerfile.dockerignore'), /^node_modules$/m, 'the host node_modules stays out of the image');
});
