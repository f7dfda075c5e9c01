// The spilled batches one long scan reads (the export: engine/timer-export.ts through
// engine/timer-query.ts), read apart from the engine's bucket cache: each run file opened once
// for the scan, not once a batch; each batch decoded into memory the scan reuses, not a new
// buffer; and the batches a window read kept for the next one, which starts inside the last
// bucket group the window read. Main thread; owned by the scan, which closes it at its end.
//
//   window k:    read(run, bucket) ─► current   (read into pooled memory, by an open RunReader)
//   window k+1:  startWindow(): current ─► previous; read(…) takes from previous first
//   window k+2:  startWindow(): what of previous window k+1 did not take goes back to the pool
//
// The scan's windows use their batches only until the next window starts (the export encodes a
// window's record batches before it looks for the next), so a batch two windows old is
// referenced by nothing and its memory can take another batch. A read still under way then (a
// read ahead the scan never waited for) is forgotten, not pooled: its memory is still written to.
// A run a checkpoint or compaction dropped meanwhile has its file closed at the next window
// (once the reads under way settle), so an export a slow client holds for hours keeps no
// deleted run file's space.
import type { EngineState } from '../state.ts';
import { batchDecodeBytes } from './run-arrow.ts';
import type { RunMeta } from './run-meta.ts';
import { RunReader } from './run-reader.ts';
import type { RunRows } from './run-rows.ts';

/** Where a scan reads its spilled batches from: timer-query.ts's spilledHits. */
export interface BucketReads {
  /** Batch `bucket` of `run`, decoded. */
  read(run: RunMeta, bucket: number): Promise<RunRows>;
  /** A new window of the scan begins: batches of the one before the last may be let go. */
  startWindow(): void;
}

/** The engine's bucket cache: for short scans (a list page), which keep nothing. */
export function cachedReads(s: EngineState): BucketReads {
  return { read: (run, bucket) => s.spill.readBucket(run, bucket), startWindow: () => undefined };
}

interface Read {
  readonly rows: Promise<RunRows>;
  readonly memory: Uint8Array;
  settled: boolean;
}

/** Free memories kept for reuse: a window frees about as many as it reads (a few bucket groups, a batch of each run). */
const poolMax = 8;

export class ScanReads implements BucketReads {
  readonly #s: EngineState;
  readonly #readers = new Map<number, Promise<RunReader>>();
  #current = new Map<string, Read>();
  #previous = new Map<string, Read>();
  readonly #pool: Uint8Array[] = [];
  readonly #underWay = new Set<Promise<unknown>>();
  readonly #closing = new Set<Promise<void>>();

  constructor(s: EngineState) {
    this.#s = s;
  }

  startWindow(): void {
    for (const read of this.#previous.values()) if (read.settled) this.#free(read.memory);
    this.#previous = this.#current;
    this.#current = new Map();
    this.#closeDropped();
  }

  read(run: RunMeta, bucket: number): Promise<RunRows> {
    const name = `${run.runId}:${bucket}`;
    const known = this.#current.get(name) ?? this.#previous.get(name);
    if (known !== undefined) {
      this.#previous.delete(name);
      this.#current.set(name, known);
      return known.rows;
    }
    const meta = run.buckets[bucket];
    if (meta === undefined) throw new RangeError(`run ${run.runId} has no batch ${bucket}`);
    const memory = this.#take(batchDecodeBytes(meta.byteLength, run.version));
    const rows = this.#s.spill.tracked(this.#readerOf(run).then((reader) => reader.readBucket(bucket, memory)));
    const read: Read = { rows, memory, settled: false };
    const settle = (): void => {
      read.settled = true;
      this.#underWay.delete(rows);
    };
    this.#underWay.add(rows);
    rows.then(settle, settle);
    this.#current.set(name, read);
    return rows;
  }

  /** Waits for the reads under way, then closes the run files. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.#underWay, ...this.#closing]);
    this.#current.clear();
    this.#previous.clear();
    const readers = await Promise.allSettled(this.#readers.values());
    this.#readers.clear();
    for (const reader of readers) if (reader.status === 'fulfilled') await reader.value.close();
  }

  /** Closes the files of runs the spill tier no longer lists (no window reads them again), after the reads under way. */
  #closeDropped(): void {
    if (this.#readers.size === 0) return;
    const listed = new Set(this.#s.spill.runs.map((run) => run.meta.runId));
    for (const [runId, reader] of this.#readers) {
      if (listed.has(runId)) continue;
      this.#readers.delete(runId);
      const closing = Promise.allSettled([...this.#underWay])
        .then(() => reader)
        .then(
          (open) => open.close(),
          () => undefined,
        );
      this.#closing.add(closing);
      const done = (): void => void this.#closing.delete(closing);
      closing.then(done, done);
    }
  }

  #readerOf(run: RunMeta): Promise<RunReader> {
    let reader = this.#readers.get(run.runId);
    if (reader === undefined) {
      reader = RunReader.open(this.#s.fs, this.#s.spillDir, run);
      // A failed open is tried again by the next read of the run.
      reader.catch(() => this.#readers.delete(run.runId));
      this.#readers.set(run.runId, reader);
    }
    return reader;
  }

  /** Memory of at least `bytes`: a pooled one that fits, else a new one with room to spare (batches of a run differ a little). */
  #take(bytes: number): Uint8Array {
    for (let i = 0; i < this.#pool.length; i++) {
      const memory = this.#pool[i] as Uint8Array;
      if (memory.length >= bytes) {
        this.#pool[i] = this.#pool[this.#pool.length - 1] as Uint8Array;
        this.#pool.pop();
        return memory;
      }
    }
    return new Uint8Array(Math.ceil((bytes * 1.25) / 4096) * 4096);
  }

  #free(memory: Uint8Array): void {
    if (this.#pool.length < poolMax) this.#pool.push(memory);
  }
}
