// Which PATCHes a cluster node applies on the raw HTTP/2 stream (h2-patch.ts, decision 0035):
// those of a timer whose partition this node owns now, that no other node forwarded. The
// engine is the one the cluster front's route would use (cluster/router.ts: the partition's
// engine here, the same lookup), and the answer names the timer by the id the client sent, as
// that route does. Anything else is left to the route: a malformed id or one past P (404), a
// partition another node owns (forwarded to it) or none does now (503 PARTITION_MOVING with
// Retry-After), and a forwarded request, whose cluster secret the route checks and which it
// never forwards again. Main thread, like the listener that offers the streams.
import type http2 from 'node:http2';
import type { Engine } from '../../../engine/engine.ts';
import { idLength } from '../../../engine/ids.ts';
import type { PartitionDirectory } from '../../../cluster/partition-directory.ts';
import { partitionOfId } from '../../../cluster/partitioning.ts';
import type { PatchTimers } from '../h2-patch.ts';
import { forwardedHeader } from './forwarder.ts';

export function clusterPatchTimers(directory: PartitionDirectory): PatchTimers {
  return {
    engineOf(id: string, headers: http2.IncomingHttpHeaders): Engine | undefined {
      if (headers[forwardedHeader] !== undefined) return undefined;
      const partition = partitionOfId(id, directory.partitions);
      return partition === undefined ? undefined : directory.engineOf(partition);
    },
    // A cluster id is its partition's prefix and the engine's id (cluster/partitioning.ts); a plain id is partition 0's as it is.
    engineIdOf: (id) => id.slice(id.length - idLength),
  };
}
