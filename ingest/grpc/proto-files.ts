// Where the gRPC API's .proto files are (proto/ at the repository's root) and how they are
// loaded: by @grpc/proto-loader for the service (decision 0020), by protobufjs (the library under
// it) for the google.rpc error details. The loader's options are the ones the handlers' message
// types (timer-messages.ts) are written for: field names as in the .proto, 64-bit integers as
// numbers, enums as their names, scalars present with their defaults, and each oneof's name set
// to the field it holds. Loaded once, by the main thread, when the gRPC service starts.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protoLoader, { type PackageDefinition } from '@grpc/proto-loader';
import { protoPath as healthProtoPath } from 'grpc-health-check';
import protobuf from 'protobufjs';

/** proto/: two levels up from these sources, one from the bundle's chunks in dist/ (bin/bundle.js). */
export const protoDir = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../../proto/' : '../proto/', import.meta.url));

const requireHere = createRequire(import.meta.url);

export const timersProtoFile = 'fermata/v1/timers.proto';

export const loaderOptions: protoLoader.Options = { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true, includeDirs: [protoDir] };

/** fermata.v1 and the types it uses, as grpc-js and the reflection service take them. */
export function timersPackage(): PackageDefinition {
  return protoLoader.loadSync(timersProtoFile, loaderOptions);
}

/**
 * What server reflection describes: fermata.v1 and the health and reflection services beside it,
 * from the .proto files their packages ship.
 */
export function reflectedPackage(): PackageDefinition {
  const healthRoot = healthProtoPath.slice(0, -'health/v1/health.proto'.length);
  const reflectionRoot = join(dirname(requireHere.resolve('@grpc/reflection')), '../proto');
  return protoLoader.loadSync([timersProtoFile, 'health/v1/health.proto', 'grpc/reflection/v1/reflection.proto'], { ...loaderOptions, includeDirs: [protoDir, healthRoot, reflectionRoot] });
}

/** google.rpc.Status and its error details, with the well-known types protobufjs carries. */
export function errorDetailsRoot(): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => (target.startsWith('google/protobuf/') ? target : `${protoDir}${target}`);
  return root.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto'], { keepCase: true });
}
