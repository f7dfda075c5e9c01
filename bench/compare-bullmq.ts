// The BullMQ side of the compare suite: the workloads of compare-fermata.ts, on a Redis that
// compare started (AOF on, with the fsync policy of the run). Queues and the worker live in
// this process, as they would in a BullMQ user's service. A job carries what a fermata timer
// does (target, 128-byte payload) plus its intended fire time, so the worker's POST to the
// sink carries `fermata-fire-at` and the sink measures lateness the same way for both sides.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { type BulkJob, type BullMq, type JobOptions, type Queue, type RedisClient, type RedisConnection, type Worker } from './bullmq-scratch.ts';
import { awaitDelivery, awaitLateness, chunks, type CompareTiming, compareShape, type Delivery, type Lateness, type MemoryUse, type SingleAdds } from './compare-shape.ts';
import { newMicrosHistogram } from '../loadgen/load-generator.ts';
import type { RedisServer } from './redis-server.ts';
import { usedMemoryBytes } from './redis-server.ts';
import type { BenchSink } from '../loadgen/sink.ts';
import { payloadText } from '../loadgen/timer-bodies.ts';

interface TimerJob {
  readonly target: string;
  readonly payload: string;
  /** Intended fire time, epoch ms. */
  readonly fire_at: number;
}

const jobName = 'timer';
const payload = payloadText(compareShape.payloadBytes);
/** Settle time before reading Redis memory after a fill (lazy frees, AOF rewrite buffers). */
const settleMs = 1000;

function farDelayMs(): number {
  return compareShape.farDelayMinMs + Math.floor(Math.random() * (compareShape.farDelayMaxMs - compareShape.farDelayMinMs + 1));
}

function jobOptions(delay: number): JobOptions {
  return { delay, removeOnComplete: true, removeOnFail: true };
}

function farJob(): BulkJob<TimerJob> {
  const delay = farDelayMs();
  return { name: jobName, data: { target: compareShape.farTarget, payload, fire_at: Date.now() + delay }, opts: jobOptions(delay) };
}

export class BullMqSide {
  readonly #bull: BullMq;
  readonly #connection: RedisConnection;
  readonly #queues: Queue<TimerJob>[] = [];
  #worker: Worker | undefined;
  #deliveryQueue: Queue<TimerJob> | undefined;
  #sinkSession: http2.ClientHttp2Session | undefined;
  #failures = 0;

  constructor(bull: BullMq, redis: RedisServer) {
    this.#bull = bull;
    this.#connection = { host: '127.0.0.1', port: redis.port, maxRetriesPerRequest: null };
  }

  /** Jobs the worker failed (the sink never refuses, so any is a fault of the run). */
  get failures(): number {
    return this.#failures;
  }

  async #queue(name: string): Promise<Queue<TimerJob>> {
    const queue = new this.#bull.Queue<TimerJob>(name, { connection: this.#connection });
    this.#queues.push(queue);
    await queue.waitUntilReady();
    return queue;
  }

  /** `singleWriters` loops, each awaiting `queue.add` of one far-future job at a time. */
  async singleAdds(timing: CompareTiming): Promise<SingleAdds> {
    const queue = await this.#queue('single');
    const latencyUs = newMicrosHistogram();
    const start = performance.now() + timing.warmupMs;
    const end = start + timing.measureMs;
    let ok = 0;
    let errors = 0;
    const writer = async (): Promise<void> => {
      while (performance.now() < end) {
        const job = farJob();
        const sent = performance.now();
        try {
          await queue.add(job.name, job.data, job.opts);
        } catch {
          errors++;
          continue;
        }
        const now = performance.now();
        if (now >= start && now < end) {
          ok++;
          latencyUs.recordValue(Math.max(1, Math.round((now - sent) * 1000)));
        }
      }
    };
    await Promise.all(Array.from({ length: compareShape.singleWriters }, writer));
    return { perS: ok / (timing.measureMs / 1000), latencyUs, errors };
  }

  /** addBulk of 10,000 far-future jobs at a time: one warm-up, then until the span ends; jobs ÷ time to the last answer. */
  async bulkAdds(timing: CompareTiming): Promise<number> {
    const queue = await this.#queue('bulk');
    const jobs = Array.from({ length: compareShape.batchRows }, farJob);
    await queue.addBulk(jobs);
    const start = performance.now();
    let added = 0;
    let last = start;
    while (performance.now() < start + timing.measureMs) {
      await queue.addBulk(jobs);
      added += jobs.length;
      last = performance.now();
    }
    return added / ((last - start) / 1000);
  }

  /** `count` jobs all due at one instant `leadMs` ahead, added first (addBulk); the worker POSTs each to the sink. */
  async delivery(sink: BenchSink, count: number, leadMs: number): Promise<Delivery> {
    const queue = await this.#startWorker(sink);
    const dueMs = Date.now() + leadMs;
    for (const rows of chunks(count)) {
      const delay = Math.max(0, dueMs - Date.now());
      await queue.addBulk(Array.from({ length: rows }, () => ({ name: jobName, data: { target: `${sink.url}/hook`, payload, fire_at: dueMs }, opts: jobOptions(delay) })));
    }
    return awaitDelivery(sink, count, dueMs);
  }

  /** Jobs due at the given instants (epoch ms), added ahead of the first; lateness of their arrivals. */
  async lateness(sink: BenchSink, fireAtMs: readonly number[]): Promise<Lateness> {
    const queue = await this.#startWorker(sink);
    for (let first = 0; first < fireAtMs.length; first += compareShape.batchRows) {
      const now = Date.now();
      const slice = fireAtMs.slice(first, first + compareShape.batchRows);
      await queue.addBulk(slice.map((at) => ({ name: jobName, data: { target: `${sink.url}/hook`, payload, fire_at: at }, opts: jobOptions(Math.max(0, at - now)) })));
    }
    return awaitLateness(sink, fireAtMs);
  }

  /** Growth of Redis `used_memory` while `count` far-future jobs are added (addBulk), after a warm-up batch; ÷ count. */
  async memory(count: number): Promise<MemoryUse> {
    const queue = await this.#queue('memory');
    const client = new this.#bull.Redis({ host: this.#connection.host, port: this.#connection.port });
    try {
      return await fill(queue, client, count);
    } finally {
      await client.quit();
    }
  }

  /** The delivery queue and its worker, started once: concurrency as fermata's one worker to one origin. */
  async #startWorker(sink: BenchSink): Promise<Queue<TimerJob>> {
    if (this.#deliveryQueue !== undefined) return this.#deliveryQueue;
    const session = http2.connect(sink.url, { maxSessionMemory: 64 });
    session.on('error', () => undefined); // the jobs in flight fail with it and count
    await once(session, 'remoteSettings');
    this.#sinkSession = session;
    const worker = new this.#bull.Worker<TimerJob>('deliver', (job) => postToSink(session, job.data), { connection: this.#connection, concurrency: compareShape.workerConcurrency });
    worker.on('failed', () => this.#failures++);
    await worker.waitUntilReady();
    this.#worker = worker;
    this.#deliveryQueue = await this.#queue('deliver');
    return this.#deliveryQueue;
  }

  async close(): Promise<void> {
    await this.#worker?.close();
    for (const queue of this.#queues) await queue.close();
    this.#sinkSession?.close();
  }
}

/** Growth of `used_memory` while `count` far-future jobs are added, after a warm-up batch; ÷ count. */
async function fill(queue: Queue<TimerJob>, client: RedisClient, count: number): Promise<MemoryUse> {
  await queue.addBulk(Array.from({ length: compareShape.batchRows }, farJob));
  await sleep(settleMs);
  const before = usedMemoryBytes(await client.info('memory'));
  for (const rows of chunks(count)) await queue.addBulk(Array.from({ length: rows }, farJob));
  await sleep(settleMs);
  const after = usedMemoryBytes(await client.info('memory'));
  return { bytesPerTimer: (after - before) / count, measure: 'growth of Redis INFO used_memory' };
}

/** What fermata's delivery does, from a BullMQ job: POST the payload with its fire time; fail unless 2xx. */
async function postToSink(session: http2.ClientHttp2Session, job: TimerJob): Promise<void> {
  const url = new URL(job.target);
  const body = Buffer.from(job.payload);
  const stream = session.request({
    ':method': 'POST',
    ':path': url.pathname,
    'content-type': 'application/octet-stream',
    'content-length': body.length,
    'fermata-fire-at': String(job.fire_at),
  });
  let status = 0;
  stream.once('response', (headers) => (status = Number(headers[':status'])));
  stream.resume();
  stream.end(body);
  await once(stream, 'end');
  assert.ok(status >= 200 && status <= 299, `the sink answered ${status}`);
}
