// Free space on the data directory's file system, for /readyz and for adds: red once fewer
// bytes are free than a minimum, so a load balancer stops sending, and adds are refused (507
// DISK_FULL) before a write fails for want of space; the space left is kept for cancels,
// delivery outcomes and checkpoints, which are not refused. (A write that fails all the same
// poisons the log, and `fermata serve` opens the data directory again.) Readings come from
// statfs (injectable, so tests can fill a disk that is not there), at most one every
// `checkIntervalMs`; probes in between are answered from the last reading, and probes that
// arrive while a reading is under way share it.
//
// Owned by the main thread's event loop.
import { statfs as platformStatfs } from 'node:fs/promises';
import type { StatsFs } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { errorCodes, FermataError } from '../../../engine/errors.ts';

/** The part of a statfs answer read here: blocks available to an unprivileged writer, and their size. */
export type FreeBlocks = Pick<StatsFs, 'bavail' | 'frsize'>;

export type StatFs = (path: string) => Promise<FreeBlocks>;

export type DiskVerdict =
  | { readonly ok: true; readonly freeBytes: number }
  | { readonly ok: false; readonly reason: string; readonly freeBytes?: number };

export interface DiskSpaceOptions {
  /** A directory on the file system to watch (the data directory). */
  readonly dir: string;
  readonly freeBytesMin: number;
  readonly checkIntervalMs: number;
  readonly statfs?: StatFs;
  /** Monotonic milliseconds. */
  readonly now?: () => number;
}

export class DiskSpaceCheck {
  readonly dir: string;
  #freeBytesMin: number;
  readonly #checkIntervalMs: number;
  readonly #statfs: StatFs;
  readonly #now: () => number;
  #last: { readonly atMs: number; readonly verdict: DiskVerdict } | undefined;
  #reading: Promise<DiskVerdict> | undefined;

  constructor(options: DiskSpaceOptions) {
    this.dir = options.dir;
    this.#freeBytesMin = options.freeBytesMin;
    this.#checkIntervalMs = options.checkIntervalMs;
    this.#statfs = options.statfs ?? platformStatfs;
    this.#now = options.now ?? (() => performance.now());
  }

  get freeBytesMin(): number {
    return this.#freeBytesMin;
  }

  /** Bytes free at the last reading; undefined before the first, or when it failed. */
  get lastFreeBytes(): number | undefined {
    return this.#last?.verdict.freeBytes;
  }

  /** A reload's new minimum (cli/serve/reload.ts): the last reading is dropped, so the next verdict reads the disk under it. */
  setFreeBytesMin(bytes: number): void {
    this.#freeBytesMin = bytes;
    this.#last = undefined;
  }

  /** The latest verdict, read afresh when the last reading is `checkIntervalMs` old or older. */
  verdict(): Promise<DiskVerdict> {
    const last = this.#last;
    if (last !== undefined && this.#now() - last.atMs < this.#checkIntervalMs) return Promise.resolve(last.verdict);
    this.#reading ??= this.#read().finally(() => (this.#reading = undefined));
    return this.#reading;
  }

  /** A reading taken now, whatever the last one's age (what a decision to write again waits for). */
  fresh(): Promise<DiskVerdict> {
    this.#reading ??= this.#read().finally(() => (this.#reading = undefined));
    return this.#reading;
  }

  /**
   * Why adds are refused now (DISK_FULL), from the last reading; synchronous, for every add. A
   * reading older than `checkIntervalMs` is renewed in the background, so adds resume within
   * about that long once space is freed.
   */
  admitRefusal(): FermataError | undefined {
    const last = this.#last;
    if (last === undefined || this.#now() - last.atMs >= this.#checkIntervalMs) void this.verdict();
    if (last === undefined || last.verdict.ok || last.verdict.freeBytes === undefined) return undefined;
    const { freeBytes } = last.verdict;
    return new FermataError(errorCodes.diskFull, `the disk is nearly full: adds are refused while fewer than ${this.freeBytesMin} bytes are free (${freeBytes} now)`, {
      free_bytes: freeBytes,
      free_bytes_min: this.freeBytesMin,
    });
  }

  async #read(): Promise<DiskVerdict> {
    let verdict: DiskVerdict;
    try {
      const blocks = await this.#statfs(this.dir);
      const freeBytes = blocks.bavail * blocks.frsize;
      verdict =
        freeBytes >= this.freeBytesMin
          ? { ok: true, freeBytes }
          : { ok: false, freeBytes, reason: `disk nearly full: ${freeBytes} bytes free for ${this.dir}, below the minimum of ${this.freeBytesMin}` };
    } catch (err) {
      verdict = { ok: false, reason: `cannot read the free space for ${this.dir}: ${err instanceof Error ? err.message : String(err)}` };
    }
    this.#last = { atMs: this.#now(), verdict };
    return verdict;
  }
}
