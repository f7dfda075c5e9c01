// The TLS port's certificate and key files: read and checked the way a handshake will need them,
// so a bad file stops `fermata serve` with a usage error naming it before anything binds; and for
// --http3 without files of its own, the self-signed pair made in the data directory. Runs once on
// the main thread while the settings are settled.
import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { createSecureContext } from 'node:tls';
import { SelfSignedError, selfSignedPair } from '../../ingest/http3/self-signed.ts';
import type { TlsCredentials } from '../../ingest/http/listen/tls-listener.ts';
import { messageOf, UsageError } from './errors.ts';

/** A file named by a setting: its resolved path, and where the setting came from (for messages). */
export interface SettingFile {
  readonly file: string;
  readonly source: string;
}

/** Reads the certificate and key files and checks that they load, belong together and make a TLS context. */
export function readTlsCredentials(certSetting: SettingFile, keySetting: SettingFile): TlsCredentials {
  const { file: certFile } = certSetting;
  const { file: keyFile } = keySetting;
  const cert = readSettingFile(certSetting);
  const key = readSettingFile(keySetting);
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(cert);
  } catch (err) {
    throw new UsageError(`${certSetting.source} ${certFile}: not a PEM certificate: ${messageOf(err)}`);
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key);
  } catch (err) {
    throw new UsageError(`${keySetting.source} ${keyFile}: not a PEM private key: ${messageOf(err)}`);
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    throw new UsageError(`${keySetting.source} ${keyFile}: this key does not belong to the certificate in ${certFile}`);
  }
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    throw new UsageError(`${certSetting.source} ${certFile} with ${keySetting.source} ${keyFile}: TLS cannot use them: ${messageOf(err)}`);
  }
  return { cert, key };
}

/** The self-signed pair --http3 uses when no certificate is given: the one in DIR/http3, made there when missing. */
export function http3SelfSigned(dataDir: string): { certFile: string; keyFile: string } {
  try {
    return selfSignedPair(resolve(dataDir, 'http3'));
  } catch (err) {
    if (err instanceof SelfSignedError) throw new UsageError(`--http3: ${err.message}`);
    throw err;
  }
}

function readSettingFile(setting: SettingFile): Buffer {
  try {
    return readFileSync(setting.file);
  } catch (err) {
    throw new UsageError(`${setting.source} ${setting.file}: cannot read it: ${messageOf(err)}`);
  }
}
