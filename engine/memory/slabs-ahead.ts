// The byte arena's next slabs, made ahead: told how many bytes are coming, the slabs they will
// need beyond the current one's room are made off the main thread (prefaulted-buffers.ts), so
// that the copies into them do not stop for page faults. Owned by the main thread: the arena
// (store/byte-arena.ts) tells it what is coming (bytesComing) and takes a slab from it as it
// opens one (take); nothing here touches the slabs the arena holds.
//
//   bytesComing(bytes, room)  more than the room, or than the arena fills while a slab is made?
//        │                        ──▶ request slabs (at most prefaultSlabsAhead outstanding)
//        ▼                                    │ threadpool maps their pages
//   take() ◀──────────── ready ◀──────────────┘     none ready: the arena allocates its own
//
//   (idle timer)  nothing said to be coming for slabsAheadIdleMs ──▶ let go
//
// An arena filling slowly, or told only what it will hold, keeps no spare memory; drop() lets
// go of what a guess made too many of, and so does an arena that stopped filling: slabs made
// ahead are let go once no bytes have been said to be coming for slabsAheadIdleMs.
import { FillRate } from './fill-rate.ts';
import { PrefaultedBuffers, prefaultMsPerByte } from './prefaulted-buffers.ts';

/** Slabs bytesComing() keeps made ahead at most. */
const prefaultSlabsAhead = 2;
/**
 * bytesComing() looks this many times further ahead than the bytes the arena takes, at its
 * current rate, while a slab is being made. Admits of one timer each tell it only of their own
 * bytes (tens of KiB in flight), so the next slab was asked for when the current one had that
 * much room left: with 256 single admitters, 38 of 48 and 51 of 55 slabs came made ahead in
 * two 5 s runs, the rest faulting their 4 MiB on the main thread (4–6 ms each here); with the
 * lead, 53 of 54 and 54 of 54.
 */
const slabLeadFactor = 2;
/**
 * Past groupSlabsFrom slabs, the slabs an arena makes ahead are allocated several at a time: one
 * more a group for each groupSlabsStep slabs beyond, up to groupBuffersMax. Each allocation's
 * malloc header maps a fresh 2 MiB huge page on the main thread (prefaulted-buffers.ts), which
 * the kernel may first have to compact memory for: one allocation a slab was 17.5% of the main
 * thread's time in 15 s of Arrow ingest (14 million timers). The slabs of a group not yet asked
 * for hold address space and no pages, but count as external memory: an arena under 256 MiB
 * (the store suite's million timers, 192 bytes each, take 46 slabs) allocates one slab at a
 * time and holds no such slab; a larger one at most groupBuffersMax - 1 of them.
 */
const groupSlabsFrom = 64;
const groupSlabsStep = 8;
/**
 * Slabs made ahead and not taken are let go once no bytes have been said to be coming for this
 * long. A ready slab holds its whole group's allocation, pages of the group's slabs the arena
 * has since given back included: after a fill of millions of far-future timers that the loader
 * then moved to disk, a service at rest held two ready slabs and the 24 and 28 MiB groups they
 * came from, most of the VmRSS growth the fill left behind.
 */
const slabsAheadIdleMs = 1000;

export interface SlabsAheadOptions {
  /** Monotonic ms for the rate bytes are added at (tests); performance.now() otherwise. */
  readonly now?: () => number;
  /** Ms making a byte ahead takes (tests); prefaultMsPerByte() otherwise. */
  readonly prefaultMsPerByte?: () => number;
  /** Other than slabsAheadIdleMs only in tests (measured with `now`). */
  readonly slabsAheadIdleMs?: number;
}

export class SlabsAhead {
  readonly #slabBytes: number;
  /** Slabs made ahead, their pages mapped off the main thread; made on the first bytesComing(). */
  #supply: PrefaultedBuffers | undefined;
  /** The arena's bytes ever added, per ms. */
  readonly #addRate: FillRate;
  readonly #prefaultMsPerByte: () => number;
  readonly #now: () => number;
  readonly #idleMs: number;
  /** When bytesComing was last called (`now` ms): slabs made ahead are wanted until idleMs past it. */
  #askedMs = 0;
  /** Lets the slabs made ahead go once no bytes have been said to be coming for idleMs. */
  #idleTimer: NodeJS.Timeout | undefined;
  #closed = false;

  /** For an arena whose full slabs are `slabBytes` long. */
  constructor(slabBytes: number, options: SlabsAheadOptions = {}) {
    this.#slabBytes = slabBytes;
    this.#now = options.now ?? (() => performance.now());
    this.#addRate = new FillRate(this.#now);
    this.#prefaultMsPerByte = options.prefaultMsPerByte ?? prefaultMsPerByte;
    this.#idleMs = options.slabsAheadIdleMs ?? slabsAheadIdleMs;
  }

  /** Slabs take() handed out. */
  get taken(): number {
    return this.#supply?.taken ?? 0;
  }

  /** Slabs made and waiting for take(). */
  get ready(): number {
    return this.#supply?.ready ?? 0;
  }

  /**
   * Says that about `bytes` more are to be added to an arena whose current slab has `room`
   * bytes left, which has `bytesAdded` bytes added in its life and holds `slabCount` slabs. The
   * slabs they will need beyond the room are made ahead (prefaultSlabsAhead at most), further
   * ahead when the arena fills fast: as far as it fills while a slab is made (slabLeadFactor),
   * so that an arena filled by small admits in quick succession has its next slab made in time,
   * and holds at most that one spare slab.
   */
  bytesComing(bytes: number, room: number, bytesAdded: number, slabCount: number): void {
    if (this.#closed) return;
    this.#askedMs = this.#now();
    const slabBytes = this.#slabBytes;
    // At least what the arena takes, at its rate, while a slab is made (slabLeadFactor), up to a slab.
    const lead = this.#addRate.sample(bytesAdded) * slabBytes * this.#prefaultMsPerByte() * slabLeadFactor;
    const ahead = Math.max(bytes, Math.min(lead, slabBytes));
    if (ahead <= room) return;
    this.#supply ??= new PrefaultedBuffers(slabBytes);
    const coming = Math.ceil((ahead - room) / slabBytes);
    // The slabs still to come are allocated together (a replay's log, a large arena: one malloc
    // header's page fault on the main thread for several slabs), each read when asked for. A
    // large arena keeps two made ahead: its reads map whole slabs (the group's header page aside).
    const group = Math.max(coming, 1 + Math.floor(Math.max(0, slabCount - groupSlabsFrom) / groupSlabsStep));
    const slabs = Math.min(prefaultSlabsAhead, group);
    while (this.#supply.outstanding < slabs) this.#supply.request(group - this.#supply.outstanding);
    this.#watchIdle();
  }

  /** A slab of slabBytes, zero, its pages mapped, if one is ready; never waits. */
  take(): Uint8Array | undefined {
    return this.#supply?.take();
  }

  /** Frees the slabs made ahead and not taken (and those still being made, as they are done). */
  drop(): void {
    this.#supply?.dropAll();
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
  }

  /** Stops making slabs ahead, for good. */
  close(): void {
    this.#closed = true;
    this.drop();
  }

  /** Checks, idleMs after bytes were last said to be coming, whether the slabs made ahead are still wanted. */
  #watchIdle(): void {
    if (this.#idleTimer !== undefined) return;
    const check = (): void => {
      this.#idleTimer = undefined;
      const idleMs = this.#now() - this.#askedMs;
      if (idleMs >= this.#idleMs) this.drop();
      else this.#idleTimer = setTimeout(check, this.#idleMs - idleMs).unref();
    };
    this.#idleTimer = setTimeout(check, this.#idleMs).unref();
  }
}
