// A delivery worker's warm-up, run in the worker when the pool asks for it (DeliveryPool.warmUp,
// once a service has opened its data directory): first the single-delivery path run end to end,
// made-up tasks POSTed to the pool's loopback server on the main thread (warm-up-target.ts;
// nothing reaches a real target), so the first real timers after a start do not wait for V8 to
// compile that path; then HTTP/2 sessions opened to the origins the pool names (those of timers
// due soon), so their first deliveries do not wait for a connect and a handshake. Worker thread;
// tuning kept beside the delivery path, with its measurements in
// docs/decisions/0014-delivery-warm-up.md.
import { defaultQueueConfig } from '../engine/queues.ts';
import type { DeliveryResults, DeliveryTask } from './delivery-task.ts';
import { type AddressGuard, OriginClients, type OriginClientsOptions } from './origin-clients.ts';
import { DeliveryTaskBuilder } from './task-builder.ts';

/** Made-up tasks run through the delivery path, one after another, of exerciseTimersPerTask timers each. */
const exerciseTasks = 8;
const exerciseTimersPerTask = 256;
const exercisePayload = new Uint8Array(128);
/** Every fourth made-up timer has headers and a key, so that their code runs too. */
const exerciseExtras = new TextEncoder().encode('{"x-warm-up":"1"}warm-up-key');
const exerciseHeadersLength = 17;

/** The warm-up target is on loopback: its one address is the only one the warm-up's clients connect to. */
const ownServerOnly: AddressGuard = {
  resolveTarget: () => Promise.resolve({ address: '127.0.0.1', family: 4, servername: undefined }),
  checkConnectedAddress: () => undefined,
};

/** Runs a task's deliveries through `clients` (delivery-worker.ts's own path, given here to keep this module out of a cycle). */
export type DeliverThrough = (task: DeliveryTask, clients: OriginClients) => Promise<DeliveryResults | unknown>;

/** Runs exerciseTasks made-up tasks through `deliver` against `target` (the pool's warm-up target), then closes its clients. */
export async function exerciseDeliveryPath(deliver: DeliverThrough, limits: Omit<OriginClientsOptions, 'guard' | 'ca'>, target: string): Promise<void> {
  const clients = new OriginClients({ ...limits, guard: ownServerOnly });
  try {
    for (let round = 0; round < exerciseTasks; round++) await deliver(madeUpTask(target, round), clients);
  } finally {
    clients.close();
  }
}

/**
 * Opens a session to each origin, waiting `waitMs` at most (a slow or dead target must not hold
 * a start up: what is still connecting then goes on by itself); how many opened by then, and a
 * line for each that failed or was still connecting.
 */
export async function openSessions(clients: OriginClients, origins: readonly string[], waitMs: number): Promise<{ opened: number; failures: string[] }> {
  const failures: Array<string | undefined> = origins.map((origin) => `${origin}: still connecting after ${waitMs} ms`);
  let opened = 0;
  const opening = origins.map((origin, i) =>
    clients.open(new URL(origin)).then(
      () => {
        failures[i] = undefined;
        opened++;
      },
      (err: unknown) => {
        failures[i] = `${origin}: ${err instanceof Error ? err.message : String(err)}`;
      },
    ),
  );
  const waited = new Promise<void>((resolve) => setTimeout(resolve, waitMs).unref());
  await Promise.race([Promise.all(opening), waited]);
  return { opened, failures: failures.filter((failure) => failure !== undefined) };
}

function madeUpTask(target: string, round: number): DeliveryTask {
  const builder = new DeliveryTaskBuilder(exerciseTimersPerTask, undefined, exerciseTimersPerTask * exercisePayload.length);
  const fireAtMs = Date.now();
  for (let row = 0; row < exerciseTimersPerTask; row++) {
    const extras = row % 4 === 3;
    builder.add({
      seq: round + 1,
      row,
      target,
      bytes: extras ? exerciseExtras : exercisePayload,
      bytesStart: 0,
      payloadLength: extras ? 0 : exercisePayload.length,
      headersLength: extras ? exerciseHeadersLength : 0,
      keyLength: extras ? exerciseExtras.length - exerciseHeadersLength : 0,
      fireAtMs,
      notBeforeMs: 0,
      attempt: 1,
      timeoutMs: defaultQueueConfig.timeout_ms,
      policy: defaultQueueConfig,
    });
  }
  return builder.finish().task;
}

