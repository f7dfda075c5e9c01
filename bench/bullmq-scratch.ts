// BullMQ for the compare suite, kept out of the project's dependencies: `npm install --prefix`
// into bench/results/.scratch/bullmq-<version>/ (git-ignored), once, then imported from there
// at run time, with ioredis (BullMQ's Redis client, an optional peer dependency since BullMQ 6).
// The interfaces below are the part of their APIs the suite uses, checked loosely when loaded.
import { execFile } from 'node:child_process';
import { access } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export const bullmqVersion = '6.7.0';
/** BullMQ 6 leaves its Redis client to the user (an optional peer dependency). */
const ioredisVersion = '6.0.0';

const scratchDir = join(import.meta.dirname, 'results', '.scratch', `bullmq-${bullmqVersion}`);
const installTimeoutMs = 10 * 60_000;

export interface RedisConnection {
  readonly host: string;
  readonly port: number;
  /** BullMQ workers block on Redis; ioredis must not give up on their commands. */
  readonly maxRetriesPerRequest: null;
}

export interface JobOptions {
  readonly delay: number;
  readonly removeOnComplete: boolean;
  readonly removeOnFail: boolean;
}

export interface BulkJob<Data> {
  readonly name: string;
  readonly data: Data;
  readonly opts: JobOptions;
}

export interface Job<Data> {
  readonly data: Data;
}

export interface RedisClient {
  info(section: string): Promise<string>;
  quit(): Promise<unknown>;
}

export interface Queue<Data> {
  add(name: string, data: Data, opts: JobOptions): Promise<unknown>;
  addBulk(jobs: readonly BulkJob<Data>[]): Promise<unknown[]>;
  waitUntilReady(): Promise<unknown>;
  close(): Promise<void>;
}

export interface Worker {
  waitUntilReady(): Promise<unknown>;
  on(event: 'failed', listener: (job: unknown, error: Error) => void): unknown;
  close(): Promise<void>;
}

export interface BullMq {
  /** ioredis, for what BullMQ does not expose (INFO memory). */
  readonly Redis: new (options: { readonly host: string; readonly port: number }) => RedisClient;
  readonly Queue: new <Data>(name: string, options: { readonly connection: RedisConnection }) => Queue<Data>;
  readonly Worker: new <Data>(name: string, processor: (job: Job<Data>) => Promise<void>, options: { readonly connection: RedisConnection; readonly concurrency: number }) => Worker;
}

function npmInstall(): Promise<void> {
  return new Promise((resolve, reject) => {
    const args = ['install', '--prefix', scratchDir, '--no-audit', '--no-fund', '--loglevel=error', `bullmq@${bullmqVersion}`, `ioredis@${ioredisVersion}`];
    execFile('npm', args, { encoding: 'utf8', timeout: installTimeoutMs }, (err, stdout, stderr) => {
      if (err === null) resolve();
      else reject(new Error(`npm ${args.join(' ')} failed: ${err.message}\n${stdout}${stderr}`));
    });
  });
}

/** BullMQ from the scratch folder, installing it there first when it is missing. */
export async function loadBullMq(progress: (message: string) => void): Promise<BullMq> {
  const manifests = ['bullmq', 'ioredis'].map((name) => join(scratchDir, 'node_modules', name, 'package.json'));
  const installed = await Promise.all(manifests.map((manifest) => access(manifest))).then(() => true, () => false);
  if (!installed) {
    progress(`compare: installing bullmq@${bullmqVersion} and ioredis@${ioredisVersion} into ${scratchDir} (not the project's dependencies)`);
    await npmInstall();
  }
  const resolve = createRequire(join(scratchDir, 'package.json')).resolve;
  const bullmq = (await import(pathToFileURL(resolve('bullmq')).href)) as Partial<Omit<BullMq, 'Redis'>>;
  const ioredis = (await import(pathToFileURL(resolve('ioredis')).href)) as { default?: unknown };
  if (typeof bullmq.Queue !== 'function' || typeof bullmq.Worker !== 'function') throw new Error(`bullmq in ${scratchDir} does not export Queue and Worker`);
  if (typeof ioredis.default !== 'function') throw new Error(`ioredis in ${scratchDir} has no default export`);
  return { Queue: bullmq.Queue, Worker: bullmq.Worker, Redis: ioredis.default as BullMq['Redis'] };
}
