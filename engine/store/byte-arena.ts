// Variable-length byte strings (payloads, headers JSON) for resident timers, kept in a few
// large slabs instead of one ArrayBuffer per string. Owned by the main thread (the engine's
// state); dispatch workers get copies, never views.
//
// Contract: add() copies bytes in and returns a ref; the caller keeps (ref, length) in its own
// typed-array columns, because the arena records no per-string metadata at all. view() is a
// subarray over the slab, valid until that string is freed (or moved by compaction). free()
// must be called exactly once per add(), with the same length. A zero-length string costs no
// slab bytes: any ref with length 0 views as empty and frees as a no-op.
//
//   ref = slabId · 2^32 + offset                (a safe integer: slabId < 2^16)
//
//   slab 0 ┌────────┬───┬──────────┬╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌┐ live 2 strings, filled to `end`
//          │ live   │///│ live     │ never written       │ (/// = freed, counted as dead)
//          └────────┴───┴──────────┴╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌┘
//   slab 1 ┌──────────────────────────────────────────────┐  ← current: appends go here
//   slab 2   (released: its live count reached 0; id waits in the free list)
//   slab 3 ┌───────────────────────────────────────────────────────────┐ one string larger
//          └───────────────────────────────────────────────────────────┘ than a slab
//
// Each slab counts its live bytes; a slab that is not current is released when that count
// reaches 0, and the current one is rewound to offset 0 instead (released too when it is one of
// a group of slabs made ahead, whose whole allocation it would hold). Compaction is driven by the
// owner of the refs (only it knows where the strings are): markSparseSlabs() picks slabs whose
// live share has fallen below a ratio, the owner move()s every string it holds in them, and
// each such slab is released as its last string leaves.
//
// The slabs to come may be made ahead, their pages mapped off the main thread: that tuning lives
// in memory/slabs-ahead.ts, which prefaultFor() tells what is coming and a new slab is taken from.
import assert from 'node:assert/strict';
import type { BytesColumn } from '../batch/timer-batch.ts';
import { storeLimits } from '../limits.ts';
import { SlabsAhead, type SlabsAheadOptions } from '../memory/slabs-ahead.ts';
import { copyRowPart, copyRowPartWords, dataViewOf, rowLength, wordsOf } from './arena-row-copy.ts';

/** Offsets occupy the low 32 bits of a ref, so one string (and one slab) is below 4 GiB. */
export const arenaSlabBytesMax = 2 ** 32 - 1;
/** Slab ids occupy the bits of a ref above the offset; 2^16 of them, so a store keeps one in a u16 (256 GiB of 4 MiB slabs). */
export const arenaSlabCountMax = 2 ** 16;
/** ref = slab id · arenaOffsetSpan + offset. */
export const arenaOffsetSpan = 2 ** 32;

const offsetSpan = arenaOffsetSpan;
const empty = new Uint8Array(0);

/** The arena's sizes, and (tests) the tuning of the slabs it makes ahead (memory/slabs-ahead.ts). */
export interface ByteArenaOptions extends SlabsAheadOptions {
  readonly slabBytes?: number;
  /** Size of a small arena's first slab (at most slabBytes); see smallSlabBytes. */
  readonly slabBytesMin?: number;
}

/**
 * A small arena's slabs: the first is this size, and each next one holds as much as the arena
 * holds then (so its room doubles) until slabBytes is reached. A store with a few hundred
 * resident timers (a service that keeps the rest on disk) held a whole 4 MiB slab for them,
 * every page of it mapped (2 MiB pages under glibc's huge pages): 4 MB of a restarted
 * service's resident set for ~200 KB of strings.
 */
const smallSlabBytes = 64 * 1024;

/** The arena's strings as they were when hold() was called, readable while the arena changes. */
export interface ArenaHold {
  /** The bytes of a string that was live at hold() (a view: copy what you keep). */
  view(ref: number, length: number): Uint8Array;
  /** Lets the arena rewind its current slab again; the hold must not be read afterwards. */
  release(): void;
}

export class ByteArena {
  readonly slabBytes: number;
  readonly #slabBytesMin: number;
  /** Bytes of the current slab (0 while there is none): slabBytes, or less while the arena is small. */
  #currentBytes = 0;
  /** Indexed by slab id; undefined once released. */
  readonly #slabs: Array<Uint8Array | undefined> = [];
  /** Live bytes per slab id. */
  readonly #live: number[] = [];
  /** Bytes appended to each slab so far (its high-water mark); the rest was never written. */
  readonly #end: number[] = [];
  /** Slabs chosen by markSparseSlabs() whose strings their owner should move. */
  readonly #marked: boolean[] = [];
  readonly #freeSlabIds: number[] = [];
  #current = -1;
  /** Holds not yet released: while any is, the current slab is never rewound over freed strings. */
  #holds = 0;
  #bytesReserved = 0;
  #bytesLive = 0;
  /** The slabs to come, made ahead (prefaultFor). */
  readonly #slabsAhead: SlabsAhead;
  /** Bytes of strings ever freed: with bytesLive, the bytes ever added (how fast the arena fills). */
  #bytesFreed = 0;

  constructor(options: ByteArenaOptions = {}) {
    const slabBytes = options.slabBytes ?? storeLimits.arenaSlabBytes;
    assert.ok(Number.isSafeInteger(slabBytes) && slabBytes >= 1 && slabBytes <= arenaSlabBytesMax, 'slabBytes out of range');
    this.slabBytes = slabBytes;
    this.#slabBytesMin = Math.min(slabBytes, options.slabBytesMin ?? smallSlabBytes);
    assert.ok(Number.isSafeInteger(this.#slabBytesMin) && this.#slabBytesMin >= 1, 'slabBytesMin out of range');
    this.#slabsAhead = new SlabsAhead(slabBytes, options);
  }

  /** Slabs that came made ahead by prefaultFor(). */
  get slabsPrefaulted(): number {
    return this.#slabsAhead.taken;
  }

  /** Slabs made ahead and waiting to be opened. */
  get slabsMadeAhead(): number {
    return this.#slabsAhead.ready;
  }

  /**
   * Says that about `bytes` more are to be added soon (a batch being logged, the rest of a
   * replay): the slabs they will need beyond the current one's room are made ahead, their pages
   * mapped off the main thread (memory/slabs-ahead.ts), so that the copies into them do not
   * stop for page faults. dropPrefaulted() lets go of what a guess made too many of.
   */
  prefaultFor(bytes: number): void {
    const room = this.#current < 0 ? 0 : this.#currentBytes - (this.#end[this.#current] as number);
    this.#slabsAhead.bytesComing(bytes, room, this.#bytesLive + this.#bytesFreed, this.slabCount);
  }

  /** Frees the slabs made ahead and not taken (and those still being made, as they are done). */
  dropPrefaulted(): void {
    this.#slabsAhead.drop();
  }

  /** Stops making slabs ahead, for good (the arena goes on allocating its own); the strings stay. */
  close(): void {
    this.#slabsAhead.close();
  }

  /** Bytes held in slabs, live or not (what the arena costs in memory). */
  get bytesReserved(): number {
    return this.#bytesReserved;
  }

  /** Bytes of strings added and not yet freed. */
  get bytesLive(): number {
    return this.#bytesLive;
  }

  /** Slabs currently held. */
  get slabCount(): number {
    return this.#slabs.length - this.#freeSlabIds.length;
  }

  /** Copies `bytes` in; returns its ref. */
  add(bytes: Uint8Array): number {
    return this.addJoined(bytes, empty);
  }

  /**
   * Copies `first`, `second` and `third` in back to back as one string and returns its ref:
   * `second` is then at `ref + first.length`, `third` after it. All are freed together, as one
   * string.
   */
  addJoined(first: Uint8Array, second: Uint8Array, third: Uint8Array = empty): number {
    const length = first.length + second.length + third.length;
    if (length === 0) return 0;
    const ref = this.#reserve(length);
    const slab = this.#slabs[this.#slabIdOf(ref)] as Uint8Array;
    const offset = ref % offsetSpan;
    slab.set(first, offset);
    slab.set(second, offset + first.length);
    slab.set(third, offset + first.length + second.length);
    return ref;
  }

  /**
   * Copies row `row` of three byte columns in as one string, as addJoined(first[row],
   * second[row], third[row]) would.
   */
  addRow(first: BytesColumn, second: BytesColumn, third: BytesColumn, row: number): number {
    const length = rowLength(first.offsets, row) + rowLength(second.offsets, row) + rowLength(third.offsets, row);
    if (length === 0) return 0;
    const ref = this.#reserve(length);
    const slab = this.#slabs[this.#slabIdOf(ref)] as Uint8Array;
    let at = ref % offsetSpan;
    at = copyRowPart(slab, at, first, row);
    at = copyRowPart(slab, at, second, row);
    copyRowPart(slab, at, third, row);
    return ref;
  }

  /**
   * Copies row rows[i] (row i when `rows` is undefined) of three byte columns in as one string
   * each, as addRow() would, for every i < count, and writes that string's ref split in two:
   * slab id to slabOut[slots[i]], offset to offsetOut[slots[i]] (a zero-length row gets ref 0).
   * The batch insert path: rows that fit the current slab are reserved together, and a run of
   * consecutive rows whose second and third columns are empty is one copy.
   */
  addRows(
    first: BytesColumn,
    second: BytesColumn,
    third: BytesColumn,
    rows: Int32Array | undefined,
    count: number,
    slots: Int32Array,
    slabOut: Uint16Array,
    offsetOut: Uint32Array,
  ): void {
    const firstOffsets = first.offsets;
    const secondOffsets = second.offsets;
    const thirdOffsets = third.offsets;
    // Consecutive rows with nothing in the second and third columns lie back to back in the
    // first column's values exactly as the arena lays them out.
    const onlyFirst =
      rows === undefined &&
      (secondOffsets[count] as number) === (secondOffsets[0] as number) &&
      (thirdOffsets[count] as number) === (thirdOffsets[0] as number);
    // DataViews of the columns, made at the first run that copies row by row.
    let firstView: DataView | undefined;
    let secondView: DataView | undefined;
    let thirdView: DataView | undefined;
    let i = 0;
    while (i < count) {
      // The rows from i on that fit the current slab's unwritten tail (none while there is no current slab).
      const slabId = this.#current;
      const capacity = this.#currentBytes;
      const start = slabId < 0 ? capacity : (this.#end[slabId] as number);
      let end = start;
      let runEnd = i;
      for (; runEnd < count; runEnd++) {
        const row = rows === undefined ? runEnd : (rows[runEnd] as number);
        const length = rowLength(firstOffsets, row) + rowLength(secondOffsets, row) + rowLength(thirdOffsets, row);
        if (end + length > capacity) break;
        const slot = slots[runEnd] as number;
        slabOut[slot] = length === 0 ? 0 : slabId;
        offsetOut[slot] = length === 0 ? 0 : end;
        end += length;
      }
      if (runEnd === i) {
        // Row i does not fit: a new current slab, or a slab of its own if it is larger than one.
        const row = rows === undefined ? i : (rows[i] as number);
        const ref = this.addRow(first, second, third, row);
        const offset = ref % offsetSpan;
        slabOut[slots[i] as number] = (ref - offset) / offsetSpan;
        offsetOut[slots[i] as number] = offset;
        i++;
        continue;
      }
      if (end > start) {
        const slab = this.#slabs[slabId] as Uint8Array;
        this.#end[slabId] = end;
        this.#live[slabId] = (this.#live[slabId] as number) + (end - start);
        this.#bytesLive += end - start;
        if (onlyFirst) slab.set(first.values.subarray(firstOffsets[i] as number, firstOffsets[runEnd] as number), start);
        else {
          const slabWords = wordsOf(slab);
          firstView ??= dataViewOf(first.values);
          secondView ??= dataViewOf(second.values);
          thirdView ??= dataViewOf(third.values);
          let at = start;
          for (let j = i; j < runEnd; j++) {
            const row = rows === undefined ? j : (rows[j] as number);
            at = copyRowPartWords(slab, slabWords, at, first, firstView, row);
            at = copyRowPartWords(slab, slabWords, at, second, secondView, row);
            at = copyRowPartWords(slab, slabWords, at, third, thirdView, row);
          }
        }
      }
      i = runEnd;
    }
  }

  /**
   * The slab holding a live string of `length` > 0 bytes; the string starts at offsetOf(ref) in
   * it. What view() gives without making a view (for a caller that copies many strings that lie
   * back to back in one go).
   */
  slabOf(ref: number, length: number): Uint8Array {
    const slabId = this.#slabIdOf(ref);
    const slab = this.#slabs[slabId];
    // A plain condition, assert only on failure: this runs once per timer delivered.
    if (slab === undefined || length <= 0 || (ref % offsetSpan) + length > (this.#end[slabId] ?? 0)) assert.fail('slab of a ref outside any slab');
    return slab;
  }

  /** Where the string of `ref` starts in its slab (slabOf). */
  offsetOf(ref: number): number {
    return ref % offsetSpan;
  }

  /** The bytes of a live string, without copying. Writing through the view changes the string. */
  view(ref: number, length: number): Uint8Array {
    if (length === 0) return empty;
    const slabId = this.#slabIdOf(ref);
    const slab = this.#slabs[slabId];
    const offset = ref % offsetSpan;
    // Plain conditions, assert only on failure (view and free run once per timer delivered).
    if (slab === undefined || offset + length > (this.#end[slabId] ?? 0)) assert.fail('view of a ref outside any slab');
    return slab.subarray(offset, offset + length);
  }

  free(ref: number, length: number): void {
    if (length === 0) return;
    const slabId = this.#slabIdOf(ref);
    const live = (this.#live[slabId] ?? 0) - length;
    if (this.#slabs[slabId] === undefined || ref % offsetSpan + length > (this.#end[slabId] ?? 0)) assert.fail('free of a ref outside any slab');
    if (live < 0) assert.fail('slab live count below zero: a string was freed twice or with the wrong length');
    this.#live[slabId] = live;
    this.#bytesLive -= length;
    this.#bytesFreed += length;
    if (live > 0) return;
    // Rewinding writes new strings over freed ones: not while a hold may still read them (the
    // slab then fills up and is released when it is replaced, as any other emptied slab). A
    // current slab cut from a group of slabs made ahead (memory/prefaulted-buffers.ts) holds the
    // whole group's allocation, whose other slabs' pages stay mapped: it is released instead,
    // so that an arena emptied (a spill of everything) gives the group back, and the next add
    // opens a slab as an empty arena's would.
    if (slabId !== this.#current) this.#release(slabId);
    else if (this.#ownsAllocationOf(slabId)) {
      if (this.#holds === 0) this.#end[slabId] = 0;
    } else {
      this.#current = -1;
      this.#currentBytes = 0;
      this.#release(slabId);
    }
  }

  /**
   * Keeps every string live now readable while the arena goes on changing, for a reader that
   * copies strings out over several turns (a checkpoint). Nothing is written over them: slabs
   * released meanwhile stay alive through the hold (a reused slab id gets a new slab), appends
   * only go past a slab's end, and the current slab is not rewound until every hold is released.
   */
  hold(): ArenaHold {
    this.#holds++;
    const slabs = [...this.#slabs];
    let released = false;
    return {
      view: (ref, length) => {
        assert.ok(!released, 'read through a released arena hold');
        if (length === 0) return empty;
        const slab = slabs[this.#slabIdOf(ref)];
        const offset = ref % offsetSpan;
        assert.ok(slab !== undefined && offset + length <= slab.length, 'held view of a ref outside the held slabs');
        return slab.subarray(offset, offset + length);
      },
      release: () => {
        if (released) return;
        released = true;
        this.#holds--;
      },
    };
  }

  /**
   * Marks every slab except the current one whose live bytes are below `liveRatioMax` of its
   * size; returns how many. Marks from an earlier call are cleared.
   */
  markSparseSlabs(liveRatioMax: number): number {
    assert.ok(liveRatioMax >= 0 && liveRatioMax <= 1, 'liveRatioMax must be within [0, 1]');
    let marked = 0;
    for (let slabId = 0; slabId < this.#slabs.length; slabId++) {
      const slab = this.#slabs[slabId];
      const sparse = slab !== undefined && slabId !== this.#current && (this.#live[slabId] ?? 0) < liveRatioMax * slab.length;
      this.#marked[slabId] = sparse;
      if (sparse) marked++;
    }
    return marked;
  }

  /** Whether the string at `ref` lies in a slab marked by markSparseSlabs(). */
  isMarked(ref: number, length: number): boolean {
    return length > 0 && this.#marked[this.#slabIdOf(ref)] === true;
  }

  /** Copies a live string to the current slab, frees the old copy; returns the new ref. */
  move(ref: number, length: number): number {
    if (length === 0) return ref;
    const moved = this.add(this.view(ref, length));
    this.free(ref, length);
    return moved;
  }

  #slabIdOf(ref: number): number {
    return Math.floor(ref / offsetSpan);
  }

  #reserve(length: number): number {
    if (length > this.slabBytes) {
      const slabId = this.#open(length);
      this.#end[slabId] = length;
      this.#live[slabId] = length;
      this.#bytesLive += length;
      return slabId * offsetSpan;
    }
    const end = this.#current < 0 ? this.#currentBytes : (this.#end[this.#current] ?? 0);
    if (end + length > this.#currentBytes) this.#replaceCurrent(length);
    const slabId = this.#current;
    const offset = this.#end[slabId] ?? 0;
    this.#end[slabId] = offset + length;
    this.#live[slabId] = (this.#live[slabId] ?? 0) + length;
    this.#bytesLive += length;
    return slabId * offsetSpan + offset;
  }

  /** A new current slab, with room for a string of `length` (at most slabBytes). */
  #replaceCurrent(length: number): void {
    const previous = this.#current;
    const bytes = this.#nextSlabBytes(length);
    this.#current = this.#open(bytes);
    this.#currentBytes = bytes;
    if (previous >= 0 && this.#live[previous] === 0) this.#release(previous);
  }

  /** slabBytes, or while the arena is small (smallSlabBytes) what it holds, in powers of two from slabBytesMin. */
  #nextSlabBytes(length: number): number {
    // A slab made ahead is used whatever the arena holds: it was made because it fills fast.
    if (this.#slabsAhead.ready > 0) return this.slabBytes;
    const wanted = Math.max(length, this.#bytesLive);
    let bytes = this.#slabBytesMin;
    while (bytes < wanted && bytes < this.slabBytes) bytes *= 2;
    return Math.min(bytes, this.slabBytes);
  }

  #open(bytes: number): number {
    assert.ok(bytes <= arenaSlabBytesMax, 'a string of 4 GiB or more does not fit the arena');
    const slabId = this.#freeSlabIds.pop() ?? this.#slabs.length;
    assert.ok(slabId < arenaSlabCountMax, 'arena slab ids exhausted');
    // Uninitialised, as the log's read buffers are: only bytes written are ever viewed (view()
    // stops at a slab's end), and zeroing a slab costs about as much as the copy into it.
    const prefaulted = bytes === this.slabBytes ? this.#slabsAhead.take() : undefined;
    if (prefaulted !== undefined) this.#slabs[slabId] = prefaulted;
    else {
      const memory = Buffer.allocUnsafeSlow(bytes);
      this.#slabs[slabId] = new Uint8Array(memory.buffer, memory.byteOffset, bytes);
    }
    this.#live[slabId] = 0;
    this.#end[slabId] = 0;
    this.#marked[slabId] = false;
    this.#bytesReserved += bytes;
    return slabId;
  }

  /** Whether the slab is its allocation's only user (not one of a group's slabs). */
  #ownsAllocationOf(slabId: number): boolean {
    const slab = this.#slabs[slabId] as Uint8Array;
    return slab.byteLength === slab.buffer.byteLength;
  }

  #release(slabId: number): void {
    const slab = this.#slabs[slabId];
    assert.ok(slab !== undefined && this.#live[slabId] === 0 && slabId !== this.#current, 'released a slab still in use');
    this.#bytesReserved -= slab.length;
    this.#slabs[slabId] = undefined;
    this.#marked[slabId] = false;
    this.#freeSlabIds.push(slabId);
  }
}
