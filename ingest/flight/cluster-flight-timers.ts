// The timers behind the Arrow Flight service on a cluster node (`fermata serve --cluster …
// --flight`): each call is made the HTTP request it stands for and handed to the node's own
// front in process (the HttpCall of ingest/grpc/cluster-timers-service.ts, fastify's inject),
// as fermata.v1.Timers is there, so there is one router, the front's:
//
//   put     a record batch → POST /v1/timers with the Arrow body: validated whole, its rows to
//           their partitions' owners; 201 → the PutResult (cluster ids), an error answer → the
//           refusal it is (status-map.ts relayedFailure; a batch that failed in part names the
//           rows accepted)
//   queues  GET /v1/queues (the cluster's queue table); queue: GET /v1/queues/{name}, 404 → none
//   pull    not served: a "pull" queue's due timers wait in memory on the owner of each of their
//           partitions, so a DoGet through one node would lease its own partitions' timers only,
//           and another node's lease could be settled nowhere but there; DoGet and DoAction are
//           UNIMPLEMENTED saying so
//
// The call's token goes on to the request, whose check it passes again. Main thread.
import type { QueueConfig } from '../../engine/queues.ts';
import { type HttpCall, type HttpRequest, refusalOf } from '../grpc/cluster-timers-service.ts';
import { queueConfigFields } from '../grpc/timer-messages.ts';
import { mediaTypes } from '../http/media-types.ts';
import type { CallHeaders, FlightQueue, FlightTimers } from './flight-timers.ts';
import { type BatchAnswerJson, putResultOfAnswer } from './put-result.ts';

export const clusterPullUnserved =
  'DoGet and DoAction (pull delivery) are not served on a cluster node: a "pull" queue\'s due timers wait in the memory of each partition\'s owner, and one lease cannot span partitions on several nodes; use "request" or "arrow" delivery in cluster mode';

/** A queue as GET /v1/queues writes it: its config's fields beside its name (and counts, not used here). */
type QueueJson = QueueConfig & { readonly name: string };

function flightQueueOf(json: QueueJson): FlightQueue {
  const config: Partial<Record<keyof QueueConfig, unknown>> = {};
  for (const field of queueConfigFields) config[field] = json[field];
  return { name: json.name, config: config as QueueConfig };
}

export function clusterFlightTimers(http: HttpCall): FlightTimers {
  const ask = (call: CallHeaders, request: Omit<HttpRequest, 'headers'>, headers: Record<string, string> = {}): Promise<Awaited<ReturnType<HttpCall>>> =>
    http({ ...request, headers: { accept: mediaTypes.json, ...headers, ...(call.authorization === undefined ? {} : { authorization: call.authorization }) } });
  return {
    put: async (ipc, form, call) => {
      const body = Buffer.from(ipc.buffer, ipc.byteOffset, ipc.byteLength);
      const answer = await ask(call, { method: 'POST', url: '/v1/timers', body }, { 'content-type': mediaTypes.arrowStream });
      if (answer.status !== 201) throw refusalOf(answer);
      return putResultOfAnswer(JSON.parse(answer.body.toString('utf8')) as BatchAnswerJson, form);
    },
    queues: async (call) => {
      const answer = await ask(call, { method: 'GET', url: '/v1/queues' });
      if (answer.status !== 200) throw refusalOf(answer);
      return (JSON.parse(answer.body.toString('utf8')) as { queues: QueueJson[] }).queues.map(flightQueueOf);
    },
    queue: async (name, call) => {
      const answer = await ask(call, { method: 'GET', url: `/v1/queues/${encodeURIComponent(name)}` });
      if (answer.status === 404) return undefined;
      if (answer.status !== 200) throw refusalOf(answer);
      return flightQueueOf(JSON.parse(answer.body.toString('utf8')) as QueueJson);
    },
    pull: { unserved: clusterPullUnserved },
  };
}
