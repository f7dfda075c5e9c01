// `fermata serve`'s gRPC port settings (cli/serve/settings.ts, config-file.ts): --grpc and its
// alias --flight, their variables and config keys, and "grpc": {"tls": true}, which needs the
// TLS port's certificate (asked for without one, the start stops instead of serving cleartext).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { UsageError } from '../../cli/serve/errors.ts';
import { serveSettings } from '../../cli/serve/settings.ts';
import { selfSignedPair } from '../../ingest/http3/self-signed.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const dir = mkdtempSync(join(tmpdir(), 'fermata-grpc-settings-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

function config(name: string, value: unknown): string {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(value));
  return file;
}

const base = { data: join(dir, 'data') };

test('--grpc, its alias --flight, FERMATA_GRPC_LISTEN and "grpc.listen" name the gRPC port; a flag wins over the rest', () => {
  assert.deepEqual(serveSettings({ ...base, grpc: '127.0.0.1:7071' }, {}).flight, { host: '127.0.0.1', port: 7071 });
  assert.deepEqual(serveSettings({ ...base, flight: '127.0.0.1:7072' }, {}).flight, { host: '127.0.0.1', port: 7072 });
  assert.deepEqual(serveSettings({ ...base, flight: '127.0.0.1:7072' }, { FERMATA_GRPC_LISTEN: '127.0.0.1:7073' }).flight, { host: '127.0.0.1', port: 7072 });
  assert.deepEqual(serveSettings(base, { FERMATA_GRPC_LISTEN: '127.0.0.1:7073', FERMATA_FLIGHT_LISTEN: '127.0.0.1:7074' }).flight, { host: '127.0.0.1', port: 7073 });
  assert.deepEqual(serveSettings({ ...base, config: config('listen.json', { grpc: { listen: '127.0.0.1:7075' } }) }, {}).flight, { host: '127.0.0.1', port: 7075 });
  assert.deepEqual(serveSettings({ ...base, config: config('old.json', { flight: { listen: '127.0.0.1:7076' } }) }, {}).flight, { host: '127.0.0.1', port: 7076 });
  assert.equal(serveSettings(base, {}).flight, undefined);
});

test('"grpc.tls" without the TLS port\'s certificate stops the start; a non-boolean is refused naming it', () => {
  assert.throws(() => serveSettings({ ...base, grpc: '127.0.0.1:0', config: config('tls.json', { grpc: { tls: true } }) }, {}), (err: unknown) => err instanceof UsageError && /"grpc\.tls": TLS on the gRPC port needs/.test(err.message));
  assert.throws(() => serveSettings({ ...base, config: config('bad.json', { grpc: { tls: 'yes' } }) }, {}), (err: unknown) => err instanceof UsageError && /"grpc\.tls" must be true or false/.test(err.message));
  assert.equal(serveSettings({ ...base, grpc: '127.0.0.1:0' }, {}).grpcTls, false);
});

test('"grpc.tls" with a certificate serves the gRPC port with it', { skip: skipUnlessTool('openssl') }, () => {
  const { certFile, keyFile } = selfSignedPair(join(dir, 'pair'));
  const settings = serveSettings({ ...base, grpc: '127.0.0.1:0', 'tls-cert': certFile, 'tls-key': keyFile, config: config('tls-on.json', { grpc: { tls: true } }) }, {});
  assert.equal(settings.grpcTls, true);
});
