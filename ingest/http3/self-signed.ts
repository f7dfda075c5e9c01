// A self-signed certificate for local HTTP/3 (`fermata serve --http3 PORT` without --tls-cert):
// made once with the openssl command into <data>/http3/ (EC P-256, a year, SANs 127.0.0.1,
// ::1 and localhost) and reused while both files are there. Node has no API that makes
// certificates. For anything but local use, pass a real certificate.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

export interface CertificateFiles {
  readonly certFile: string;
  readonly keyFile: string;
}

/** Thrown when the pair cannot be made; the message says why and what to do. */
export class SelfSignedError extends Error {
  override readonly name = 'SelfSignedError';
}

export function selfSignedPair(dir: string): CertificateFiles {
  const certFile = join(dir, 'self-signed-cert.pem');
  const keyFile = join(dir, 'self-signed-key.pem');
  if (existsSync(certFile) && existsSync(keyFile)) return { certFile, keyFile };
  mkdirSync(dir, { recursive: true });
  const made = spawnSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '365', '-subj', '/CN=fermata-local',
      '-addext', 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost', '-keyout', keyFile, '-out', certFile],
    { encoding: 'utf8', timeout: 30_000 },
  );
  if (made.error !== undefined) {
    const missing = (made.error as NodeJS.ErrnoException).code === 'ENOENT';
    throw new SelfSignedError(missing ? 'making a self-signed certificate for --http3 needs the openssl command (Debian package openssl), or pass --tls-cert and --tls-key' : `openssl failed: ${made.error.message}`);
  }
  if (made.status !== 0) throw new SelfSignedError(`openssl could not make a self-signed certificate in ${dir}: ${made.stderr.trim()}`);
  return { certFile, keyFile };
}
