// Buffers whose pages are already mapped, made ahead off the main thread. Owned by the main thread.
//
// The first write to each page of fresh memory is a page fault, and the kernel zeroes the page
// before mapping it. On the VMs fermata is measured on that costs 0.1 ms a MiB at best and
// 1.2–1.9 ms a MiB at worst (the host maps the guest's memory lazily too), and which one a run
// gets varies from run to run: a replay of 1,000,000 timers took 0.63–1.4 s with the same code,
// the difference all in the kernel's clear_page, and a store filling with single admits spent
// a quarter of its main thread's time there. The arena fills 4 MiB slabs one after another, so
// the next one is made while the current one fills: allocated (untouched) on the main thread,
// then filled by a read of /dev/zero on libuv's threadpool, where the kernel takes the faults
// as it copies the zeros in. The buffer comes back mapped, and nothing else is needed: no helper
// thread (a worker thread costs ~19 MB of resident memory), no copy, no message. The resident
// store makes the columns of its next growth the same way (one buffer, read 16 MiB at a time).
//
//   main thread                          threadpool
//   request(): allocate ──── read(/dev/zero, buffer) ───▶ kernel maps every page
//   take() ◀── ready ◀───────────────── completion (next event-loop turn)
//
// A buffer is takeable once its read completed, so one is picked up between event-loop turns
// (a replay yields between the log chunks it waits for). One not ready yet is simply not taken:
// the caller allocates for itself, as it would without a supply. Where /dev/zero cannot be
// opened (Windows), the supply hands over nothing.
//
// The allocation itself is not free of faults: malloc writes a header next to the memory it
// hands out, and under huge pages (bin/huge-pages.js) that maps a 2 MiB page on the main thread
// (seen as sysmalloc, or createUnsafeBuffer in profiles): half of every 4 MiB slab. Fixing
// glibc's mmap threshold did not help (glibc.malloc.mmap_threshold=4194304 made a replay slower:
// 0.97–1.05 s against 0.83–0.87 s in 5 alternated pairs, every other large buffer then mapped
// fresh each time). So a caller that knows many buffers are coming (a replay) asks for them in
// groups: one allocation, one header, for up to groupBuffersMax buffers, each read (mapped) only
// when it is requested. The price: a group's memory is freed only when none of its buffers is
// used any more, and its unrequested buffers, never touched, hold address space but no pages.
import { openSync, read } from 'node:fs';
import { readLength } from './read-length.ts';

/** Buffers one allocation makes at most (request()'s `coming`): 32 MiB of 4 MiB slabs. */
export const groupBuffersMax = 8;

/** What prefaultMsPerByte() answers before any read has been timed: 1 ms a MiB, a slow VM's pace. */
const msPerByteInitial = 1 / (1024 * 1024);
/** Weight of each new read's pace in the running estimate. */
const paceWeight = 0.25;
let msPerByte = msPerByteInitial;

/**
 * How long making a byte ahead takes here, in ms: a running average over the reads of every
 * supply (their threadpool wait included), so that a caller can tell how far ahead to ask for
 * a large buffer. It moves with the machine: 0.1 ms a MiB in a quick phase, 1–2 in a slow one.
 */
export function prefaultMsPerByte(): number {
  return msPerByte;
}

let zeroFd: number | null | undefined;

/** The process's descriptor of /dev/zero, opened on first use; null where there is none. */
function zeroDevice(): number | null {
  if (zeroFd === undefined) {
    try {
      zeroFd = openSync('/dev/zero', 'r');
    } catch {
      zeroFd = null;
    }
  }
  return zeroFd;
}

export class PrefaultedBuffers {
  /** Bytes of every buffer this supply makes. */
  readonly bytes: number;
  /** Buffers read in full, waiting for take(). */
  readonly #ready: Buffer[] = [];
  /** Reads under way. */
  #reading = 0;
  /** whenIdle() callers, told once #reading is back at 0. */
  readonly #idleWaiters: Array<() => void> = [];
  /** Bumped by dropAll(): a read started before it is dropped when it ends. */
  #generation = 0;
  #taken = 0;
  /** The allocation requests take buffers from, and how many of its groupBuffers they took. */
  #group: Buffer | undefined;
  #groupBuffers = 0;
  #groupTaken = 0;

  constructor(bytes: number) {
    this.bytes = bytes;
  }

  /** Buffers take() handed out. */
  get taken(): number {
    return this.#taken;
  }

  /** Buffers made and waiting for take(). */
  get ready(): number {
    return this.#ready.length;
  }

  /** Buffers requested and not yet taken (being read, or ready). */
  get outstanding(): number {
    return this.#reading + this.#ready.length;
  }

  /** Settles once no buffer is being made: each read under way has ended (made, failed, or dropped). */
  whenIdle(): Promise<void> {
    if (this.#reading === 0) return Promise.resolve();
    const { promise, resolve } = Promise.withResolvers<void>();
    this.#idleWaiters.push(resolve);
    return promise;
  }

  /**
   * Starts making one more buffer; a no-op where there is no /dev/zero. `coming` says how many
   * the caller expects to request in all from now on (1: just this one): when a new allocation
   * is due, it makes that many (groupBuffersMax at most) as one, and the next requests take
   * the rest of the group. Never throws: memory that cannot be had now is not made ahead (the
   * caller's own allocation, when it comes, decides what that means).
   */
  request(coming = 1): void {
    const fd = zeroDevice();
    if (fd === null) return;
    if (this.#group === undefined || this.#groupTaken === this.#groupBuffers) {
      const buffers = Math.max(1, Math.min(groupBuffersMax, Math.floor(coming)));
      try {
        // Uninitialised and untouched: the reads are what map its pages.
        this.#group = Buffer.allocUnsafeSlow(this.bytes * buffers);
      } catch {
        this.#group = undefined;
        return;
      }
      this.#groupBuffers = buffers;
      this.#groupTaken = 0;
    }
    const from = this.#groupTaken++ * this.bytes;
    const buffer = this.#group.subarray(from, from + this.bytes);
    this.#reading++;
    this.#readFrom(fd, buffer, 0, this.#generation);
  }

  /** A buffer whose pages are mapped, if one is ready; never waits. Its bytes are zero. */
  take(): Uint8Array | undefined {
    const buffer = this.#ready.pop();
    if (buffer === undefined) return undefined;
    this.#taken++;
    // A plain Uint8Array, as the arena's own slabs are: its views must not be Buffers.
    return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.length);
  }

  /** Lets go of every buffer not taken: those ready now, those being made as they end, and the group's rest. */
  dropAll(): void {
    this.#ready.length = 0;
    this.#generation++;
    this.#group = undefined;
  }

  #readFrom(fd: number, buffer: Buffer, at: number, generation: number): void {
    const started = performance.now();
    read(fd, buffer, at, readLength(buffer, at), null, (err, bytesRead) => {
      // A failed or empty read leaves the buffer unmade: the caller allocates its own instead;
      // so does dropAll(), which frees it.
      if (err !== null || bytesRead === 0 || generation !== this.#generation) {
        this.#readEnded();
        return;
      }
      msPerByte += paceWeight * ((performance.now() - started) / bytesRead - msPerByte);
      if (at + bytesRead < buffer.byteLength) {
        this.#readFrom(fd, buffer, at + bytesRead, generation);
        return;
      }
      this.#ready.push(buffer);
      this.#readEnded();
    });
  }

  #readEnded(): void {
    this.#reading--;
    if (this.#reading === 0) for (const resolve of this.#idleWaiters.splice(0)) resolve();
  }
}
