// /healthz and /readyz, the two routes a load balancer or supervisor asks without a token.
// /healthz: the process serves (the answer itself is the check). /readyz: the log still
// acknowledges writes (a failed write or fsync poisons it), when a disk check is given the data
// directory's file system has room, and when a warm flag is given the delivery workers are warm
// (after a start). Main thread.
import { notReady } from '../../readiness.ts';
import type { DiskSpaceCheck } from '../listen/disk-space.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';

export interface HealthRoutesOptions extends RoutesOptions {
  /** When given, /readyz is also red while the data directory's file system is nearly full. */
  readonly disk?: DiskSpaceCheck | undefined;
  /** When given, /readyz is also red until it returns true (the dispatcher's warm-up after a start). */
  readonly warm?: (() => boolean) | undefined;
}

const statusSchema = {
  type: 'object',
  properties: { status: { type: 'string' }, reason: { type: 'string' }, free_bytes: { type: 'integer' } },
  required: ['status'],
  additionalProperties: false,
} as const;

export async function healthRoutes(app: HttpServer, { engine, disk, warm }: HealthRoutesOptions): Promise<void> {
  app.get('/healthz', { schema: { response: { 200: statusSchema } } }, healthz);

  app.get('/readyz', { schema: { response: { 200: statusSchema, 503: statusSchema } } }, async (_request, reply) => {
    const why = await notReady({ engine, disk, warm });
    if (why === undefined) return reply.send({ status: 'ready' });
    return reply.code(503).send({ status: 'not-ready', reason: why.reason, ...(why.freeBytes === undefined ? {} : { free_bytes: why.freeBytes }) });
  });
}

/** The process serves: the answer itself is the check. */
function healthz(): { status: 'ok' } {
  return { status: 'ok' };
}
