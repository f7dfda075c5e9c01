// The resident store's next columns, made ahead: when the rows on their way near the store's
// capacity, the buffer its next growth will carve into columns (store/column-growth.ts) is made
// off the main thread (prefaulted-buffers.ts), so that the growth is a copy and not a copy plus
// a page fault for every 4 KiB of hundreds of MiB. Owned by the main thread: the store calls
// it as rows are said to be coming (rowsComing), as it grows (takeFor), and as it shrinks or
// closes; nothing here touches the columns themselves.
//
//   rowsComing(rows)   free slots after them < lead? ──▶ make columnsBytes(next capacity)
//                                                          │ threadpool maps its pages
//   takeFor(capacity)  ◀── made for it or a larger one, and ready ──┘   else the growth allocates
//   (idle timer)       no rows said to be coming for idleMs ──▶ let go
//
// The lead is a share of the capacity (columnsAheadShare); for large columns, what the store
// fills while they are being made or within columnsHorizonMs, up to half the capacity.
import { columnsBytes, doubledCapacity } from '../store/column-growth.ts';
import { FillRate } from './fill-rate.ts';
import { PrefaultedBuffers, prefaultMsPerByte } from './prefaulted-buffers.ts';

/**
 * rowsComing makes the next columns ahead once the rows on their way would leave less than
 * this share (1 / it) of the capacity free. Small enough that a store filled to a capacity's
 * 95% holds no spare columns (the store suite's 1,000,000 timers in 1,048,576 slots); it
 * gives the threadpool a 32nd of the capacity's admits to map them (31 ms a million slots at
 * a million rows a second): enough on a quick machine, not on the measurement VM in a slow
 * phase, where growths of 128 MiB and more look further ahead (columnsEarlyBytesMin).
 */
const columnsAheadShare = 32;
/**
 * A growth whose new columns take at least this many bytes has them made as far ahead as the
 * store's fill rate and the machine's prefault pace say it takes to make them (twice that, to
 * be safe), up to half the capacity ahead. Arrow ingest at a million rows a second reached the
 * growths to 4, 8 and 16 million slots 0.13–0.5 s after their columns were asked for, while
 * making 228–912 MiB takes 0.1–2 ms a MiB: none was ready, each growth faulted its pages on the
 * main thread and stalled every admit 0.26–1.4 s. So did the smaller ones when this was 128 MiB:
 * 10,000-row Arrow batches one at a time stalled 110, 113, 204 and 337 ms at the growths to
 * 2^18 … 2^21 slots (15–120 MiB), a fifth of a 5-second run. Columns made ahead and no longer
 * asked for are let go (columnsAheadIdleMs), so a store that stops filling holds no spare ones.
 */
const columnsEarlyBytesMin = 1024 * 1024;
/**
 * Columns made ahead are let go when no rows have been said to be coming (rowsComing) for
 * this long: the fill stopped short of the growth (a later fill asks again). Memory at rest
 * holds no spare columns.
 */
const columnsAheadIdleMs = 100;
/** The slowest pace (ms a byte) a large growth's columns are expected to be made at. */
const largePrefaultMsPerByteMin = 2 / (1024 * 1024);
/** Columns are asked for this many times the time making them is expected to take ahead. */
const columnsLeadFactor = 2;
/**
 * Large columns are also asked for once the growth would come within this long at the fill
 * rate of the moment (still up to half the capacity ahead). The lead above follows the rate
 * at which the store fills now, and a fill that speeds up outruns it: in the compare suite,
 * 256 writers of single adds (200,000 a second) and then 10,000-row Arrow batches (a million
 * a second) reached the growth to 2^23 slots 1.7 s after its 520 MiB were asked for, when
 * they were seven eighths made (the threadpool made them at 2.8–4.3 ms a MiB while the log
 * wrote); the growth faulted its own on the main thread, a 775 ms stall of every admit. Asked
 * for at the growth before, they had 3.7 s. What this costs: while a store fills this fast,
 * the next growth's columns are held that much sooner (and let go once the fill stops).
 */
const columnsHorizonMs = 10_000;

export interface ColumnsAheadOptions {
  /** Monotonic ms for the fill rate (tests); performance.now() otherwise. */
  readonly now?: () => number;
  /** Ms making a byte ahead takes (tests); prefaultMsPerByte() otherwise. */
  readonly prefaultMsPerByte?: () => number;
  /** Lower than columnsEarlyBytesMin only in tests, to reach an early growth with small columns. */
  readonly columnsEarlyBytesMin?: number;
  /** Other than columnsAheadIdleMs only in tests (measured with `now`). */
  readonly columnsAheadIdleMs?: number;
}

/**
 * Memory a growth takes: columnsBytes(capacity, indexColumns) long, zero, its pages mapped.
 * Index columns the store took since it was asked for are not in it (the growth makes those).
 */
export interface ColumnsMadeAhead {
  readonly memory: Uint8Array;
  readonly capacity: number;
  readonly indexColumns: number;
}

export class ColumnsAhead {
  /**
   * The columns being made (or made) for the next growth, for this capacity; `forReplay` when
   * a replay asked for them (makeForReplay): kept until a growth takes them or drop().
   */
  #making: { readonly capacity: number; readonly indexColumns: number; readonly supply: PrefaultedBuffers; readonly forReplay: boolean } | undefined;
  #growthsMadeAhead = 0;
  readonly #prefaultMsPerByte: () => number;
  readonly #earlyBytesMin: number;
  readonly #idleMs: number;
  /** When rowsComing was last called (`now` ms): columns made ahead are wanted until idleMs past it. */
  #askedMs = 0;
  /** Lets the columns made ahead go once no rows have been said to be coming for idleMs. */
  #idleTimer: NodeJS.Timeout | undefined;
  /** Callers waiting for the columns being made (pending): they are still wanted. */
  #awaited = 0;
  readonly #now: () => number;
  /** The store's slots in use (its high-water mark) per ms. */
  #fillRate: FillRate;
  #closed = false;

  constructor(options: ColumnsAheadOptions = {}) {
    this.#now = options.now ?? (() => performance.now());
    this.#fillRate = new FillRate(this.#now);
    this.#idleMs = options.columnsAheadIdleMs ?? columnsAheadIdleMs;
    this.#prefaultMsPerByte = options.prefaultMsPerByte ?? prefaultMsPerByte;
    this.#earlyBytesMin = options.columnsEarlyBytesMin ?? columnsEarlyBytesMin;
  }

  /** Growths that took columns made ahead. */
  get growthsMadeAhead(): number {
    return this.#growthsMadeAhead;
  }

  /** Capacity of the columns being made ahead (0: none). */
  get capacity(): number {
    return this.#making?.capacity ?? 0;
  }

  /** Whether columns made ahead are ready for the next growth to take. */
  get ready(): boolean {
    return (this.#making?.supply.ready ?? 0) > 0;
  }

  /**
   * Says that about `rows` more timers are to be allocated soon in a store of `capacity` slots
   * (at most `capacityMax`), `highWater` of them ever used and `freeCount` of those free, with
   * `indexColumns` index columns. Once the rows would leave less than the lead free, the
   * columns of the next growth (the capacity a doubling reaches) are made ahead. Columns made
   * and not yet taken stay until the growth, until no call has asked for them for idleMs (the
   * fill stopped short of the growth), or until drop() or close().
   */
  rowsComing(rows: number, capacity: number, capacityMax: number, highWater: number, freeCount: number, indexColumns: number): void {
    if (this.#closed || capacity >= capacityMax) return;
    // Rows are still coming: columns made ahead are still wanted, whatever the lead says now.
    this.#askedMs = this.#now();
    const fillRate = this.#fillRate.sample(highWater);
    const slotsAfter = highWater + Math.max(0, rows - freeCount);
    const next = Math.min(doubledCapacity(capacity * 2, slotsAfter), capacityMax);
    if (capacity - slotsAfter >= this.#lead(capacity, next, indexColumns, fillRate)) return;
    this.#make(next, indexColumns);
  }

  /**
   * A replay's guess at the capacity the store will end at (from the log's bytes and the rows
   * its first records brought): the columns for it are made now, while the replay goes on, and
   * kept, however long the replay takes, until a growth takes them (takeFor) or drop(). A
   * growth to a smaller capacity before they are made leaves them be, for a later one. Columns
   * of less than columnsEarlyBytesMin are not made: faulting them costs less than the trip.
   */
  makeForReplay(capacity: number, indexColumns: number): void {
    if (this.#closed || this.#making?.capacity === capacity || columnsBytes(capacity, indexColumns) < this.#earlyBytesMin) return;
    this.drop();
    this.#making = { capacity, indexColumns, supply: this.#request(capacity, indexColumns), forReplay: true };
  }

  /**
   * Free slots at which the columns for `next` are asked for: 1/columnsAheadShare of the
   * capacity, or for a large growth the slots the fill rate takes while they are being made
   * (columnsEarlyBytesMin) or within columnsHorizonMs, whichever is more.
   */
  #lead(capacity: number, next: number, indexColumns: number, fillRate: number): number {
    const share = capacity / columnsAheadShare;
    const bytes = columnsBytes(next, indexColumns);
    if (bytes < this.#earlyBytesMin) return share;
    // The measured pace comes mostly from the arena's 4 MiB slabs; hundreds of MiB at once, on a
    // threadpool the log's writes and syncs share, went at 1–2.8 ms a MiB (0.36–0.41 measured).
    const makingMs = bytes * Math.max(this.#prefaultMsPerByte(), largePrefaultMsPerByteMin);
    return Math.min(capacity / 2, Math.max(share, fillRate * Math.max(makingMs * columnsLeadFactor, columnsHorizonMs)));
  }

  /**
   * When a growth to hold `needed` slots (at most `capacityMax`) is coming and the columns for
   * it are still being made: a promise that settles once their making has ended (made, failed,
   * or dropped). Otherwise undefined, and the caller goes on at once. While any caller waits
   * they are not let go for want of being asked.
   */
  pending(needed: number, capacityMax: number): Promise<void> | undefined {
    const making = this.#making;
    if (making === undefined || making.supply.ready > 0) return undefined;
    if (making.capacity < Math.min(needed, capacityMax)) return undefined;
    this.#awaited++;
    return making.supply.whenIdle().finally(() => {
      this.#awaited--;
      this.#askedMs = this.#now();
    });
  }

  /**
   * For a growth to `capacity`: the memory made for it or a larger one, if its pages are mapped
   * by now (the growth then goes to that capacity). Either way what was made ahead is done with
   * (one still being made is freed once its read under way ends).
   */
  takeFor(capacity: number): ColumnsMadeAhead | undefined {
    const making = this.#making;
    if (making === undefined) return undefined;
    // A replay's columns, for a growth further on: this smaller one does without them.
    if (making.forReplay && making.capacity > capacity && making.supply.ready === 0) return undefined;
    const memory = making.capacity >= capacity ? making.supply.take() : undefined;
    this.drop();
    if (memory === undefined) return undefined;
    this.#growthsMadeAhead++;
    return { memory, capacity: making.capacity, indexColumns: making.indexColumns };
  }

  /** Lets go of the columns made ahead and not taken (those being made, as they are done). */
  drop(): void {
    this.#making?.supply.dropAll();
    this.#making = undefined;
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
  }

  /** After the store's high-water mark fell (a shrink): the fill rate starts again. */
  restartFillRate(): void {
    this.#fillRate = new FillRate(this.#now);
  }

  /** Stops making columns ahead, for good. */
  close(): void {
    this.#closed = true;
    this.drop();
  }

  #make(capacity: number, indexColumns: number): void {
    if (this.#making?.capacity === capacity) return;
    this.#making?.supply.dropAll();
    this.#making = { capacity, indexColumns, supply: this.#request(capacity, indexColumns), forReplay: false };
    this.#watchIdle();
  }

  /** Starts making one buffer for the columns of `capacity` slots. */
  #request(capacity: number, indexColumns: number): PrefaultedBuffers {
    const supply = new PrefaultedBuffers(columnsBytes(capacity, indexColumns));
    supply.request();
    return supply;
  }

  /** Checks, idleMs after rows were last said to be coming, whether the columns made ahead are still wanted. */
  #watchIdle(): void {
    if (this.#idleTimer !== undefined) return;
    const check = (): void => {
      this.#idleTimer = undefined;
      if (this.#making === undefined) return;
      const idleMs = this.#awaited > 0 ? 0 : this.#now() - this.#askedMs;
      if (idleMs >= this.#idleMs) this.drop();
      else this.#idleTimer = setTimeout(check, this.#idleMs - idleMs).unref();
    };
    this.#idleTimer = setTimeout(check, this.#idleMs).unref();
  }
}
