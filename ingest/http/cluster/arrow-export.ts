// The Arrow export of GET /v1/timers in cluster mode (Accept: application/vnd.apache.arrow.stream;
// fan-out.ts hands it the request): one Arrow IPC stream of the export's schema
// (engine/timer-export.ts), its record batches every partition's in turn, partition 0 first, each
// partition's in its (fire_at, id) order, with cluster ids. A partition owned here is read from
// its engine a batch at a time as the response takes them; another node's is asked of its owner
// (forwarded once, for that partition alone, which the owner answers from its engine) and its
// bytes passed on as they arrive, as the response takes them (the owner's sends wait meanwhile:
// HTTP/2 flow control), so a partition of any size goes through: the forward timeout bounds the
// wait for the owner's answer and each wait for more of it, not the whole. Every partition's route is
// known before the answer starts (one that has no owner now is 503 PARTITION_MOVING, nothing
// sent); a partition that fails later cuts the response short, without the stream's end marker
// (curl: "transfer closed"), rather than end it as if it were whole. Main thread, fastify's.
import { Readable } from 'node:stream';
import { Table, tableToIPC } from 'apache-arrow';
import { decodeCursor, queryStart } from '../../../engine/engine.ts';
import { errorCodes, FermataError } from '../../../engine/errors.ts';
import { exportSchema } from '../../../engine/timer-export.ts';
import type { TimerFilter } from '../../../engine/timer-query.ts';
import { clusterIdOf } from '../../../cluster/partitioning.ts';
import type { PartitionRoute } from '../../../cluster/router.ts';
import { mediaTypes } from '../media-types.ts';
import { timerListLimits } from '../route-limits.ts';
import type { ForwardRequest, ForwardStream } from './forwarder.ts';

/** One partition of an export: where to start (its engine's cursor, '' for its start). */
export interface ExportPart {
  readonly partition: number;
  readonly cursor: string;
}

export interface ClusterArrowExport {
  /**
   * The export of `parts` for `filter`, the response's body (a PARTITION_MOVING error when a
   * part has no owner now); `query` is the request's filter parameters (what an owner is asked
   * with), `headers` the request's (its token goes on to the owners).
   */
  (filter: TimerFilter, parts: readonly ExportPart[], query: object, headers: ForwardRequest['headers']): Readable;
}

export interface ClusterArrowExportOptions {
  /** Where a partition is for this request (a forwarded one is served here or not at all). */
  readonly routeFor: (partition: number, headers: ForwardRequest['headers']) => PartitionRoute;
  /** Asks an owner, its answer's body read as it arrives (Forwarder.open). */
  readonly open: (address: string, request: ForwardRequest) => Promise<ForwardStream>;
  /** The header naming the one partition a forwarded list asks for (fan-out.ts). */
  readonly partitionHeader: string;
}

/** The IPC stream's end: a continuation marker and a zero length. */
const endLength = 8;
/** An empty export: the schema message, then the end marker; every partition's stream starts and ends with them. */
const emptyExport = tableToIPC(new Table(exportSchema), 'stream');
const schemaMessage = emptyExport.subarray(0, emptyExport.length - endLength);
const endOfStream = emptyExport.subarray(emptyExport.length - endLength);

const moving = (partition: number): FermataError =>
  new FermataError(errorCodes.partitionMoving, `partition ${partition} is moving between nodes (or its owner is out of reach): try again`);

export function clusterArrowExport({ routeFor, open, partitionHeader }: ClusterArrowExportOptions): ClusterArrowExport {
  /** A local partition's record batches: its engine's export without its schema message and end marker. */
  async function* localBatches(route: Extract<PartitionRoute, { kind: 'local' }>, filter: TimerFilter, cursor: string): AsyncGenerator<Uint8Array> {
    const after = cursor === '' ? queryStart : (decodeCursor(cursor) ?? queryStart);
    let held: Uint8Array | undefined;
    let first = true;
    for await (const chunk of route.engine.exportTimers(filter, timerListLimits.exportBatchRows, after, clusterIdOf(route.partition, ''))) {
      if (first) {
        first = false;
        continue;
      }
      // Held back one chunk: the last is the end marker.
      if (held !== undefined) yield held;
      held = chunk;
    }
  }

  /**
   * A remote partition's record batches, asked of its owner for that partition alone: the owner's
   * export stream as it arrives, less its schema message (checked to be the export's) and its end
   * marker (held back until the stream ends, and checked: an owner's stream cut short fails the
   * partition rather than pass for whole).
   */
  async function* remoteBatches(route: Extract<PartitionRoute, { kind: 'remote' }>, query: object, cursor: string, headers: ForwardRequest['headers']): AsyncGenerator<Uint8Array> {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) if (name !== 'cursor' && name !== 'limit' && typeof value === 'string') params.set(name, value);
    if (cursor !== '') params.set('cursor', cursor);
    const answer = await open(route.address, { method: 'GET', path: `/v1/timers?${params.toString()}`, headers: { ...headers, accept: mediaTypes.arrowStream, [partitionHeader]: String(route.partition) } });
    const notWhole = (what: string): Error => new Error(`partition ${route.partition}'s owner at ${route.address} answered its export ${answer.status}: ${what}, not a whole export stream`);
    if (answer.status !== 200) {
      const error: Buffer[] = [];
      for await (const chunk of answer.body) error.push(chunk);
      throw notWhole(Buffer.concat(error).toString('utf8').slice(0, 500));
    }
    let head: Buffer = Buffer.alloc(0);
    let tail: Buffer = Buffer.alloc(0);
    for await (const chunk of answer.body) {
      let bytes = chunk;
      if (head.length < schemaMessage.length) {
        const wanted = schemaMessage.length - head.length;
        head = Buffer.concat([head, bytes.subarray(0, wanted)]);
        bytes = bytes.subarray(wanted);
        if (head.length < schemaMessage.length) continue;
        if (!head.equals(schemaMessage)) throw notWhole('a stream of another schema');
      }
      const held = tail.length === 0 ? bytes : Buffer.concat([tail, bytes]);
      tail = held.subarray(Math.max(0, held.length - endLength));
      if (held.length > endLength) yield held.subarray(0, held.length - endLength);
    }
    if (head.length < schemaMessage.length || !tail.equals(endOfStream)) throw notWhole('a stream that ended before its end marker');
  }

  return (filter, parts, query, headers) => {
    const routes = parts.map(({ partition, cursor }) => {
      const route = routeFor(partition, headers);
      if (route.kind === 'moving') throw moving(partition);
      return { route, cursor };
    });
    async function* stream(): AsyncGenerator<Uint8Array> {
      yield schemaMessage;
      for (const { route, cursor } of routes) {
        if (route.kind === 'local') yield* localBatches(route, filter, cursor);
        else if (route.kind === 'remote') yield* remoteBatches(route, query, cursor, headers);
      }
      yield endOfStream;
    }
    // One batch read ahead at most, as on one node: the next is made when the response has taken this one.
    return Readable.from(stream(), { objectMode: false, highWaterMark: 1 });
  };
}
