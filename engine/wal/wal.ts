// The write-ahead log: the engine's durable truth, and its DurableLog (engine/log.ts) on one
// machine (opened through local-log.ts). One Wal owns its directory (a pid lock keeps other
// processes out) and is driven from the main thread's event loop.
//
// Group commit (LevelDB's DBImpl::Write, etcd's WAL): `append` only queues a record and
// returns a promise. The committer takes everything queued (up to groupBytesMax), numbers the
// records, writes them with one writev and covers them with one fdatasync; only then do their
// promises resolve. On Linux segments are opened write-through (O_DSYNC): the writev is then
// durable when it returns, one system call and one threadpool round trip where a write and an
// fdatasync take two (measured, 256 single admitters in process: the cycle's disk part 0.37 ms
// against 0.12 + 0.33, 8–17% more admits a second).
// Appends that arrive while a group is being written ride the next one, so the cost of a sync
// is shared by every caller waiting on it. Once a group is durable, the next group's write is
// started before the durable group's promises resolve, so what their callers do next (an admit
// puts its batch in memory) overlaps the disk's work.
//
// On a write-through segment two groups may be written at once (writesInFlightMax): appends
// that arrive while a group's write is under way start the next group's write then (after the
// task, or at once with startNow) instead of waiting for it. The disk takes two O_DSYNC writes
// in ~1.4 times the time of one (28 KiB each, this VM), and with 256 single admitters the log
// had been busy all the time, one write after another. The later group's records are flagged
// overlapped and acknowledged only after the group ahead: a power loss may leave the earlier
// group torn behind an intact later one, which recovery (docs/format/wal.md) cuts as a torn
// tail because of the flag.
//
//   append ─► queue ─► committer: [roll segment?] ─► writev(group) ─► fdatasync¹ ─┬► writev(next group)
//                 └──── (write-through, one group being written) ─► writev(next)²  └► resolve all
//
//   ¹ not called on a write-through segment: its writev was the sync.
//   ² its records flagged overlapped; resolved after the group ahead of it.
//
// A failed write or sync poisons the log: the group, every group being written behind it and
// everything queued reject with WAL_POISONED, as does every later append. Nothing is retried
// in place (after a failed fdatasync the kernel may have dropped the dirty pages; only
// recovery, which re-reads the disk, knows what is there).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorCodes, FermataError, systemErrorCode } from '../errors.ts';
import { failpoint } from '../failpoints.ts';
import type { DirLock, FileHandle, FileSystem } from '../fs/file-system.ts';
import { nodeFileSystem } from '../fs/node-file-system.ts';
import { assertWalLimits, walLimits, type WalLimits } from '../limits.ts';
import type { AppendOptions, DurableLog, LogRecord } from '../log.ts';
import { decodeFrame } from './decoder.ts';
import { encodeRecordHeader, encodeSegmentHeader } from './encoder.ts';
import { recordHeaderBytes, recordTypeMax, recordTypeReserved, segmentFileName, segmentHeaderBytes } from './format.ts';
import { type RecordTypes, type RecordVisitor, recoverSegments, type RecoveryReport, type SegmentInfo } from './recovery.ts';

/** Bodies below this size are copied into the group's write buffer; larger ones are written in place. */
const copyBodyBytesMax = 64 * 1024;

export interface WalLogger {
  warn(details: object, message: string): void;
}

/** What one group commit did, for histograms and logs. */
export interface GroupCommitStats {
  readonly records: number;
  readonly bytes: number;
  /** The writev's time (0 on a write-through segment, whose writev is the sync). */
  readonly writeMs: number;
  /** The fdatasync's time, or on a write-through segment the writev's. */
  readonly syncMs: number;
}

export interface WalOptions {
  readonly dir: string;
  readonly fs?: FileSystem;
  readonly limits?: Partial<WalLimits>;
  readonly logger?: WalLogger;
  readonly onGroupCommitted?: (stats: GroupCommitStats) => void;
  /** Told once, when a failed write or sync poisons the log (after every waiting append is rejected). */
  readonly onPoisoned?: (poison: FermataError) => void;
  /**
   * Sees every record already in the log, in order, while open() reads the segments for
   * recovery: replaying state this way reads the log once. If it throws, open() fails with that.
   */
  readonly replay?: RecordVisitor;
  /** The record types the replay knows: a complete record of any other refuses the open (FORMAT_TOO_NEW). Absent: any type. */
  readonly recordTypes?: RecordTypes;
  /**
   * The sequence a durable checkpoint covers (0 or absent: none). Segments holding only records
   * up to it may have been deleted (deleteCoveredSegments), so the log may start later.
   */
  readonly coveredSeq?: number;
}

export interface WalCounters {
  appends: number;
  groups: number;
  syncs: number;
  bytesWritten: number;
  slowSyncs: number;
  lastSyncAtMs?: number;
  segmentsCreated: number;
  /** Groups whose write started while the group ahead of them was still being written. */
  overlappedGroups: number;
}

interface GroupSize {
  readonly count: number;
  readonly bytes: number;
}

/** A group whose write has been started, at `at` in `segment` (its synced end, or where the group ahead of it ends). */
interface StartedGroup {
  readonly group: PendingAppend[];
  readonly segment: SegmentInfo;
  /** The segment's handle the write went to. */
  readonly handle: FileHandle;
  readonly baseSeq: number;
  readonly at: number;
  readonly groupBytes: number;
  readonly startedMs: number;
  /** Resolves with the time (performance.now()) the write returned, which for a group behind another may be before it is awaited. */
  readonly written: Promise<number>;
}

interface PendingAppend {
  readonly type: number;
  /** The record body is these parts, concatenated. */
  readonly parts: readonly Uint8Array[];
  readonly bodyBytes: number;
  readonly resolve: (seq: number) => void;
  readonly reject: (err: unknown) => void;
}

export class Wal implements DurableLog {
  readonly dir: string;
  readonly recovery: RecoveryReport;
  readonly counters: WalCounters = { appends: 0, groups: 0, syncs: 0, bytesWritten: 0, slowSyncs: 0, segmentsCreated: 0, overlappedGroups: 0 };

  readonly #fs: FileSystem;
  readonly #limits: WalLimits;
  readonly #lock: DirLock;
  readonly #logger: WalLogger | undefined;
  readonly #onGroupCommitted: ((stats: GroupCommitStats) => void) | undefined;
  readonly #onPoisoned: ((poison: FermataError) => void) | undefined;
  readonly #segments: SegmentInfo[];
  #active: FileHandle;
  #queue: PendingAppend[] = [];
  #queuedBytes = 0;
  #committer: Promise<void> | undefined;
  /** Groups whose writes were started and not yet acknowledged, oldest first (writesInFlightMax at most), all on the active segment. */
  #inFlight: StartedGroup[] = [];
  /** An overlapping write is to be started after the current task (#startWrites). */
  #writesScheduled = false;
  #poison: FermataError | undefined;
  #closed = false;

  private constructor(options: WalOptions, fs: FileSystem, limits: WalLimits, lock: DirLock, recovery: RecoveryReport, active: FileHandle) {
    this.dir = options.dir;
    this.#fs = fs;
    this.#limits = limits;
    this.#lock = lock;
    this.#logger = options.logger;
    this.#onGroupCommitted = options.onGroupCommitted;
    this.#onPoisoned = options.onPoisoned;
    this.recovery = recovery;
    this.#segments = recovery.segments;
    this.#active = active;
  }

  /** Opens (creating if needed) the log in `options.dir`: lock, recover, ready to append. */
  static async open(options: WalOptions): Promise<Wal> {
    const fs = options.fs ?? nodeFileSystem;
    const limits: WalLimits = { ...walLimits, ...options.limits };
    assertWalLimits(limits);
    await fs.mkdirp(options.dir);
    const lock = await fs.lockDir(options.dir);
    try {
      const coveredSeq = options.coveredSeq ?? 0;
      const recovery = await recoverSegments(fs, options.dir, options.replay, coveredSeq, options.recordTypes);
      const last = recovery.segments.at(-1);
      let active: FileHandle;
      // The segment being written is never deleted, so a checkpointed log always has one.
      if (last === undefined && coveredSeq > 0) {
        throw new FermataError(errorCodes.walCorrupt, `WAL corrupt: ${options.dir} holds no segment, but a checkpoint covers up to sequence ${coveredSeq}; refusing to start`, {
          dir: options.dir,
        });
      }
      if (last === undefined) {
        active = await createSegment(fs, options.dir, 1, 1);
        recovery.segments.push({ id: 1, baseSeq: 1, lastSeq: 0, bytes: segmentHeaderBytes });
      } else {
        active = await fs.open(join(options.dir, segmentFileName(last.id)), 'readwrite', writeThrough);
      }
      if (recovery.repair !== undefined) options.logger?.warn({ ...recovery.repair }, 'WAL torn tail repaired');
      return new Wal(options, fs, limits, lock, recovery, active);
    } catch (err) {
      await lock.release();
      throw err;
    }
  }

  /** Sequence of the newest durable record (0 when the log has never held one). */
  get lastSeq(): number {
    return (this.#segments.at(-1) as SegmentInfo).lastSeq;
  }

  /** Sequence of the oldest record still in the log. */
  get firstSeq(): number {
    return (this.#segments[0] as SegmentInfo).baseSeq;
  }

  get poisoned(): FermataError | undefined {
    return this.#poison;
  }

  get segmentCount(): number {
    return this.#segments.length;
  }

  /**
   * Queues one record and resolves with its sequence once it is durable. The body is `body`,
   * or the concatenation of its parts (an engine header before an Arrow batch, say); large
   * parts are written where they lie, so the caller must not change them until the promise
   * settles.
   */
  append(type: number, body: Uint8Array | readonly Uint8Array[], options: AppendOptions = {}): Promise<number> {
    const parts = body instanceof Uint8Array ? [body] : body;
    let bodyBytes = 0;
    for (const part of parts) bodyBytes += part.length;
    assert.ok(Number.isInteger(type) && type > recordTypeReserved && type <= recordTypeMax, `record type ${type} out of range`);
    if (this.#poison !== undefined) return Promise.reject(this.#poison);
    if (this.#closed) return Promise.reject(new FermataError(errorCodes.walClosed, 'the WAL is closed'));
    if (bodyBytes > this.#limits.recordBodyBytesMax) {
      return Promise.reject(
        new FermataError(errorCodes.walRecordTooLarge, `record of ${bodyBytes} bytes exceeds recordBodyBytesMax (${this.#limits.recordBodyBytesMax})`, {
          bytes: bodyBytes,
        }),
      );
    }
    const frameBytes = recordHeaderBytes + bodyBytes;
    if (options.pastQueueLimit !== true && this.#queuedBytes + frameBytes > this.#limits.queueBytesMax) {
      return Promise.reject(new FermataError(errorCodes.walQueueFull, `WAL queue full (${this.#queuedBytes} bytes waiting)`, { queuedBytes: this.#queuedBytes }));
    }
    const { promise, resolve, reject } = Promise.withResolvers<number>();
    this.#queue.push({ type, parts, bodyBytes, resolve, reject });
    this.#queuedBytes += frameBytes;
    this.counters.appends++;
    // Start the committer after the current task, so a burst of synchronous appends forms one
    // group; or, asked to, at once (the loop reaches its write before it first waits: this
    // record is queued and the log is not poisoned). While a group is being written, the next
    // one may be too (write-through): started the same way, after the task or at once.
    if (this.#committer === undefined) this.#committer = options.startNow === true ? this.#commitLoop() : Promise.resolve().then(() => this.#commitLoop());
    else if (this.#inFlight.length > 0 && this.#inFlight.length < this.#writesMax()) {
      if (options.startNow === true) this.#startWrites();
      else this.#scheduleWrites();
    }
    return promise;
  }

  /** Durable records with sequence ≥ `fromSeq`, in order, read back from the segment files. */
  async *records(fromSeq = 1): AsyncGenerator<LogRecord> {
    for (const segment of [...this.#segments]) {
      if (segment.lastSeq < fromSeq) continue;
      const durableBytes = segment.bytes;
      const lastSeq = segment.lastSeq;
      const path = join(this.dir, segmentFileName(segment.id));
      const bytes = await this.#fs.readFile(path);
      let offset = segmentHeaderBytes;
      for (let seq = segment.baseSeq; seq <= lastSeq; seq++) {
        const frame = decodeFrame(bytes.subarray(0, durableBytes), offset, segment.id, seq);
        if (frame.verdict !== 'record') {
          throw new FermataError(errorCodes.walCorrupt, `WAL corrupt: ${path} at offset ${offset}: ${frame.verdict === 'end' ? 'ends early' : frame.reason}`, {
            file: path,
            offset,
          });
        }
        offset = frame.next;
        if (seq >= fromSeq) yield { seq, type: frame.type, body: frame.body };
      }
    }
  }

  /**
   * After a poison: cuts the segment being written back to its last synced length and syncs
   * the cut, so that the next open reads no record whose write or sync failed (their clients
   * were refused) and nothing is appended after bytes the kernel may have dropped (after a
   * failed fdatasync Linux marks the pages clean, written or not). Rejects while the disk still
   * fails: the caller tries again before it opens the directory anew.
   */
  async cutToSynced(): Promise<void> {
    assert.ok(this.#poison !== undefined && !this.#closed, 'only an open, poisoned log is cut back');
    // The commit loop ends at the poison; a group it was writing is part of what is cut.
    await this.#committer;
    const segment = this.#segments.at(-1) as SegmentInfo;
    await this.#active.truncate(segment.bytes);
    await this.#active.datasync();
  }

  /**
   * Starts a new segment when a checkpoint (`coveredSeq`) covers every record of the active one
   * and no append is waiting or being written: deleteCoveredSegments can then delete the old
   * segment, and a restart reads nothing the checkpoint already holds. Otherwise (newer records
   * are in it, or are about to go in) it does nothing: a later checkpoint covers that segment.
   * Appends made meanwhile wait behind it, as behind a group commit.
   */
  async sealCovered(coveredSeq: number): Promise<void> {
    // A committer finishing its last group (nothing queued behind it) is let finish first.
    while (this.#committer !== undefined && this.#queue.length === 0) await this.#committer;
    const active = this.#segments.at(-1) as SegmentInfo;
    const holdsRecords = active.lastSeq >= active.baseSeq;
    if (!holdsRecords || active.lastSeq > coveredSeq || this.#poison !== undefined || this.#closed || this.#committer !== undefined || this.#queue.length > 0) return;
    // As a group commit's roll: a failure poisons the log; appends queued meanwhile go next.
    // The committer is set before the roll starts, so no append can start a second one.
    const sealed = Promise.resolve()
      .then(() => this.#roll(active))
      .then(
        () => this.#commitLoop(),
        (err: unknown) => {
          this.#poisonWith(err, []);
          this.#committer = undefined;
        },
      );
    this.#committer = sealed;
    await sealed;
  }

  /**
   * Deletes the sealed segments whose records all have sequences ≤ `coveredSeq` (a durable
   * checkpoint holds their effect), then syncs the directory. The segment being written stays.
   * Returns how many were deleted.
   */
  async deleteCoveredSegments(coveredSeq: number): Promise<number> {
    let deleted = 0;
    // Oldest first, so a crash midway leaves a log that still starts at one contiguous point.
    while (this.#segments.length > 1 && (this.#segments[0] as SegmentInfo).lastSeq <= coveredSeq) {
      const segment = this.#segments[0] as SegmentInfo;
      await this.#fs.unlink(join(this.dir, segmentFileName(segment.id)));
      this.#segments.shift();
      deleted++;
    }
    if (deleted > 0) await this.#fs.syncDir(this.dir);
    return deleted;
  }

  /** Bytes of all segments (the log's disk use). */
  get bytes(): number {
    let bytes = 0;
    for (const segment of this.#segments) bytes += segment.bytes;
    return bytes;
  }

  /** Every segment is read again at open, covered records and all. */
  get bytesToReplay(): number {
    return this.bytes;
  }

  /** The active segment is sealed when the checkpoint covers all of it, then every wholly covered segment goes. */
  async truncateCovered(coveredSeq: number): Promise<number> {
    await this.sealCovered(coveredSeq);
    return this.deleteCoveredSegments(coveredSeq);
  }

  describe(): Readonly<Record<string, string | number>> {
    return { dir: this.dir, segments: this.#segments.length };
  }

  /** Commits what is queued, stops taking appends, releases the directory. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#committer;
    await this.#active.close().catch(() => undefined);
    await this.#lock.release();
  }

  async #commitLoop(): Promise<void> {
    try {
      while (this.#poison === undefined) {
        let head = this.#inFlight[0];
        if (head === undefined) {
          if (this.#queue.length === 0) break;
          if (this.#limits.groupWaitMsMax > 0 && this.#queuedBytes < this.#limits.groupBytesMax) await sleep(this.#limits.groupWaitMsMax);
          const group = this.#takeGroup(this.#groupSize());
          try {
            head = await this.#startGroup(group);
          } catch (err) {
            this.#poisonWith(err, group);
            break;
          }
        }
        try {
          await this.#finishGroup(head);
        } catch (err) {
          // Every group being written goes with the failed one (none ahead of it is unacknowledged);
          // the loop ends only once their writes are done, so a cut (cutToSynced) races none.
          const failed = this.#inFlight;
          this.#inFlight = [];
          this.#poisonWith(err, failed.flatMap((started) => started.group));
          await Promise.allSettled(failed.map((started) => started.written));
        }
      }
    } finally {
      this.#committer = undefined;
    }
  }

  /** How many queued records the next group takes (at least one), and their framed bytes. */
  #groupSize(): GroupSize {
    let bytes = 0;
    let count = 0;
    for (const pending of this.#queue) {
      const frameBytes = recordHeaderBytes + pending.bodyBytes;
      if (count > 0 && bytes + frameBytes > this.#limits.groupBytesMax) break;
      bytes += frameBytes;
      count++;
    }
    return { count, bytes };
  }

  #takeGroup({ count, bytes }: GroupSize): PendingAppend[] {
    const group = count === this.#queue.length ? this.#queue : this.#queue.slice(0, count);
    this.#queue = count === this.#queue.length ? [] : this.#queue.slice(count);
    this.#queuedBytes -= bytes;
    return group;
  }

  /** #startWrites after the current task, beside a write under way (otherwise the commit loop starts the next group). */
  #scheduleWrites(): void {
    if (this.#writesScheduled) return;
    this.#writesScheduled = true;
    queueMicrotask(() => {
      this.#writesScheduled = false;
      if (this.#inFlight.length > 0) this.#startWrites();
    });
  }

  /** Where the next group's write goes in the active segment: after the groups being written. */
  #writeEnd(segment: SegmentInfo): number {
    const last = this.#inFlight.at(-1);
    return last === undefined ? segment.bytes : last.at + last.groupBytes;
  }

  #needsRoll(segment: SegmentInfo, groupBytes: number): boolean {
    const end = this.#writeEnd(segment);
    return end > segmentHeaderBytes && end + groupBytes > this.#limits.segmentBytes;
  }

  /** Writes the log keeps going at once: writesInFlightMax on a write-through segment, else one. */
  #writesMax(): number {
    return this.#active.writeThrough ? this.#limits.writesInFlightMax : 1;
  }

  /** Starts a new segment if the group does not fit the active one, then starts its write (nothing else is being written). */
  async #startGroup(group: PendingAppend[]): Promise<StartedGroup> {
    let groupBytes = 0;
    for (const pending of group) groupBytes += recordHeaderBytes + pending.bodyBytes;
    let segment = this.#segments.at(-1) as SegmentInfo;
    if (this.#needsRoll(segment, groupBytes)) segment = await this.#roll(segment);
    return this.#writeGroup(group, segment, groupBytes);
  }

  /**
   * Frames the group and starts its write behind the groups being written, or at the segment's
   * synced end; its records are flagged overlapped when a write ahead of it is under way.
   */
  #writeGroup(group: PendingAppend[], segment: SegmentInfo, groupBytes: number): StartedGroup {
    const ahead = this.#inFlight.at(-1);
    const baseSeq = ahead === undefined ? segment.lastSeq + 1 : ahead.baseSeq + ahead.group.length;
    const at = this.#writeEnd(segment);
    const chunks = encodeGroup(group, baseSeq, segment.id, groupBytes, ahead !== undefined);
    const startedMs = performance.now();
    const handle = this.#active;
    const written = handle.writev(chunks, at).then(() => performance.now());
    // Awaited by #finishGroup once the groups ahead are acknowledged.
    written.catch(() => undefined);
    const started: StartedGroup = { group, segment, handle, baseSeq, at, groupBytes, startedMs, written };
    this.#inFlight.push(started);
    if (ahead !== undefined) this.counters.overlappedGroups++;
    return started;
  }

  /**
   * Starts the writes of queued groups while fewer than #writesMax() are under way and each can
   * start without waiting (no group wait configured, no new segment needed); what cannot waits
   * for the loop.
   */
  #startWrites(): void {
    while (this.#queue.length > 0 && this.#inFlight.length < this.#writesMax() && this.#limits.groupWaitMsMax === 0 && this.#poison === undefined) {
      const size = this.#groupSize();
      const segment = this.#segments.at(-1) as SegmentInfo;
      if (this.#needsRoll(segment, size.bytes)) return;
      const group = this.#takeGroup(size);
      try {
        this.#writeGroup(group, segment, size.bytes);
      } catch {
        // Back to the front of the queue: the loop starts it the usual way, and a failure there
        // poisons this group, not one ahead that is already durable.
        this.#queue = [...group, ...this.#queue];
        this.#queuedBytes += size.bytes;
        return;
      }
    }
  }

  /**
   * Waits for the oldest group's write, syncs it and acknowledges its records. Just before the
   * acknowledgements the next groups' writes are started: the appenders' work on their
   * acknowledged records (an admit puts its batch in memory) then runs while the disk takes
   * the next group, instead of leaving the log idle until it is done.
   */
  async #finishGroup(started: StartedGroup): Promise<void> {
    const { group, segment, handle, baseSeq, groupBytes, startedMs } = started;
    const written = await started.written;
    failpoint('wal.written-before-sync');
    if (!handle.writeThrough) await handle.datasync();
    // Write-through: the write was the sync, and its time is the sync's.
    const syncMs = handle.writeThrough ? written - startedMs : performance.now() - written;
    failpoint('wal.synced-before-ack');

    assert.equal(this.#inFlight[0], started, 'groups are acknowledged in the order they were written');
    this.#inFlight.shift();
    segment.bytes += groupBytes;
    segment.lastSeq = baseSeq + group.length - 1;
    this.counters.groups++;
    this.counters.syncs++;
    this.counters.lastSyncAtMs = Date.now();
    this.counters.bytesWritten += groupBytes;
    const slow = syncMs > this.#limits.slowSyncMs;
    if (slow) this.counters.slowSyncs++;
    // Nothing else being written: the next group goes at once. Beside a write still under way,
    // after the acknowledged appenders have made their next appends, which then go with it.
    const writing = this.#inFlight.length > 0;
    if (!writing) this.#startWrites();
    for (let i = 0; i < group.length; i++) (group[i] as PendingAppend).resolve(baseSeq + i);
    if (writing) this.#scheduleWrites();
    // An observer's failure must not poison a log whose group is already durable and acknowledged.
    try {
      if (slow) this.#logger?.warn({ syncMs, bytes: groupBytes, records: group.length, writeThrough: handle.writeThrough }, handle.writeThrough ? 'slow write-through write' : 'slow fdatasync');
      this.#onGroupCommitted?.({ records: group.length, bytes: groupBytes, writeMs: handle.writeThrough ? 0 : written - startedMs, syncMs });
    } catch (err) {
      this.#logger?.warn({ err }, 'a group commit observer threw');
    }
  }

  /** Seals `current` (already synced) and makes the next segment durable before any record goes in. */
  async #roll(current: SegmentInfo): Promise<SegmentInfo> {
    const next: SegmentInfo = { id: current.id + 1, baseSeq: current.lastSeq + 1, lastSeq: current.lastSeq, bytes: segmentHeaderBytes };
    const handle = await createSegment(this.#fs, this.dir, next.id, next.baseSeq);
    const sealed = this.#active;
    this.#active = handle;
    this.#segments.push(next);
    this.counters.segmentsCreated++;
    await sealed.close();
    return next;
  }

  #poisonWith(cause: unknown, group: PendingAppend[]): void {
    const code = systemErrorCode(cause);
    const reason = code === 'ENOSPC' ? 'the disk is full' : `${code ?? 'I/O error'}`;
    const poison = new FermataError(errorCodes.walPoisoned, `WAL poisoned (${reason}): no more appends until recovery re-reads the disk`, { cause: code }, cause);
    this.#poison = poison;
    this.#logger?.warn({ err: cause }, 'WAL poisoned');
    for (const pending of group) pending.reject(poison);
    for (const pending of this.#queue) pending.reject(poison);
    this.#queue = [];
    this.#queuedBytes = 0;
    // An observer's failure must not stop the commit loop from waiting for the writes under way.
    try {
      this.#onPoisoned?.(poison);
    } catch (err) {
      this.#logger?.warn({ err }, 'onPoisoned threw');
    }
  }
}

/**
 * Frames a group for one writev. Headers and small bodies are copied into one buffer, so a
 * group of small records is one contiguous write and each record one checksum pass; bodies of
 * `copyBodyBytesMax` or more are left where they are (an Arrow batch is never copied) and
 * their parts become chunks of their own between the copied runs.
 */
function encodeGroup(group: readonly PendingAppend[], baseSeq: number, segmentId: number, groupBytes: number, overlapped: boolean): Uint8Array[] {
  let copiedBytes = groupBytes;
  for (const pending of group) if (pending.bodyBytes >= copyBodyBytesMax) copiedBytes -= pending.bodyBytes;
  const buffer = Buffer.allocUnsafe(copiedBytes);
  const view = new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  const chunks: Uint8Array[] = [];
  let runStart = 0;
  let at = 0;
  for (let i = 0; i < group.length; i++) {
    const { type, parts, bodyBytes } = group[i] as PendingAppend;
    const fields = { type, seq: baseSeq + i, segmentId, indexInGroup: i, overlapped };
    if (bodyBytes < copyBodyBytesMax) {
      let partAt = at + recordHeaderBytes;
      for (const part of parts) {
        buffer.set(part, partAt);
        partAt += part.length;
      }
      encodeRecordHeader(buffer, view, at, fields, parts, bodyBytes, true);
      at = partAt;
    } else {
      encodeRecordHeader(buffer, view, at, fields, parts, bodyBytes, false);
      at += recordHeaderBytes;
      chunks.push(buffer.subarray(runStart, at), ...parts);
      runStart = at;
    }
  }
  assert.equal(at, copiedBytes);
  if (runStart < at) chunks.push(buffer.subarray(runStart, at));
  return chunks;
}

/** Segments are written through where the platform can (see the top of this file). */
const writeThrough = { writeThrough: true } as const;

async function createSegment(fs: FileSystem, dir: string, id: number, baseSeq: number): Promise<FileHandle> {
  const handle = await fs.open(join(dir, segmentFileName(id)), 'create', writeThrough);
  try {
    failpoint('wal.segment-created-empty');
    await handle.writev([encodeSegmentHeader(id, baseSeq)], 0);
    if (!handle.writeThrough) await handle.datasync();
    await fs.syncDir(dir);
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw err;
  }
  return handle;
}
