// The HTTP side of a cluster node until the router (engineer "router") replaces it: the node's
// own partitions only, over HTTP/1.1. It answers
//
//   GET  /healthz, /readyz        ready once the node has joined the cluster
//   POST /v1/timers               application/x-ndjson: the whole batch to one partition this
//                                 node owns (round robin), 201 as the single-node API answers;
//                                 503 + Retry-After while it owns none. Keys are deduplicated
//                                 within that partition only.
//   GET  /v1/cluster              this node, its partitions and epochs, every partition's owner
//   GET  /v1/stats                the node's partitions and their timers' counts
//   GET  /metrics                 fermata_cluster_partitions_owned, fermata_cluster_sends_refused_total
//
// Bearer tokens as the single-node server checks them; errors in its JSON shape (error-map.ts).
// Main thread.
import type { AddressInfo } from 'node:net';
import { fastify } from 'fastify';
import type { Logger } from 'pino';
import type { ClusterNode } from '../../cluster/node.ts';
import type { TimerStateName } from '../../engine/engine.ts';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import { ingestLimits } from '../../engine/limits.ts';
import { batchFromNdjson } from '../../ingest/http/body/json-batch.ts';
import { errorAnswer } from '../../ingest/http/error-map.ts';
import { bearerCheck } from '../../ingest/http/listen/bearer-auth.ts';
import { mediaTypes } from '../../ingest/http/media-types.ts';

export interface ClusterFront {
  /** Listens on host:port (0: a free port); resolves with the port bound. */
  listen(host: string, port: number): Promise<number>;
  /** The node once it has joined: until then every route but /healthz answers 503. */
  attach(node: ClusterNode): void;
  /** Stops accepting, lets open requests finish. */
  close(): Promise<void>;
}

export function createClusterFront(tokens: readonly string[], logger: Logger): ClusterFront {
  const app = fastify({ loggerInstance: logger.child({ component: 'http' }), disableRequestLogging: true, bodyLimit: ingestLimits.bodyBytesMax });
  let node: ClusterNode | undefined;
  let next = 0;
  const bearer = bearerCheck(tokens);
  const joined = (): ClusterNode => {
    if (node === undefined) throw new FermataError(errorCodes.logUnavailable, 'this node has not joined the cluster yet: nothing was appended', {});
    return node;
  };

  app.addContentTypeParser(mediaTypes.ndjson, { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  app.addHook('onRequest', async (request, reply) => {
    if (tokens.length === 0 || bearer.allows(request.url.split('?')[0] ?? '', request.headers.authorization)) return;
    await reply.code(401).send({ error: { code: 'UNAUTHORIZED', message: 'a bearer token is needed: authorization: Bearer <token>' } });
  });
  app.setErrorHandler(async (err, request, reply) => {
    const answer = errorAnswer(err, request.headers['content-type']);
    if (answer.unexpected) request.log.error({ err }, 'request failed');
    if (answer.retryAfterSeconds !== undefined) void reply.header('retry-after', String(answer.retryAfterSeconds));
    await reply.code(answer.status).send(answer.body);
  });

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async () => ({ status: 'ready', partitions_owned: joined().owned().length }));
  app.post('/v1/timers', async (request, reply) => {
    const member = joined();
    const owned = member.owned();
    if (owned.length === 0) throw new FermataError(errorCodes.logUnavailable, 'this node owns no partition right now: nothing was appended', {});
    const partition = owned[next++ % owned.length] as number;
    const engine = member.engineOf(partition);
    if (engine === undefined) throw new FermataError(errorCodes.logUnavailable, `partition ${partition} is moving: nothing was appended`, {});
    const { batch } = batchFromNdjson(request.body as Buffer, engine.clock.now());
    const admitted = await engine.admit(batch);
    const ids = new Array<string>(admitted.rows);
    for (let row = 0; row < admitted.rows; row++) ids[row] = admitted.idOf(row);
    return reply.code(201).send({ accepted: admitted.rows, duplicates: admitted.duplicates, ids, partition });
  });
  app.get('/v1/cluster', async () => {
    const member = joined();
    return {
      node_id: member.nodeId,
      partitions: member.partitions,
      owned: member.owned().map((partition) => ({ partition, epoch: Number(member.epochOf(partition) ?? 0n) })),
      owners: Array.from({ length: member.partitions }, (_, partition) => member.ownerAddress(partition) ?? null),
    };
  });
  app.get('/v1/stats', async () => {
    const member = joined();
    const counts: Partial<Record<TimerStateName, number>> = {};
    for (const partition of member.owned()) {
      for (const [state, count] of Object.entries(member.engineOf(partition)?.stats().counts ?? {})) counts[state as TimerStateName] = (counts[state as TimerStateName] ?? 0) + count;
    }
    return { counts, cluster: { node_id: member.nodeId, partitions: member.partitions, partitions_owned: member.owned().length, sends_refused_total: member.sendsRefused } };
  });
  app.get('/metrics', async (_request, reply) => {
    const member = joined();
    const text =
      '# HELP fermata_cluster_partitions_owned Partitions this node owns now.\n# TYPE fermata_cluster_partitions_owned gauge\n' +
      `fermata_cluster_partitions_owned ${member.owned().length}\n` +
      '# HELP fermata_cluster_sends_refused_total Deliveries the workers did not send because the partition\'s local lease deadline had passed.\n' +
      '# TYPE fermata_cluster_sends_refused_total counter\n' +
      `fermata_cluster_sends_refused_total ${member.sendsRefused}\n`;
    return reply.type('text/plain; version=0.0.4').send(text);
  });
  return {
    async listen(host, port) {
      await app.listen({ host, port });
      return (app.server.address() as AddressInfo).port;
    },
    attach(member) {
      node = member;
    },
    close: () => app.close(),
  };
}
