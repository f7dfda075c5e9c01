// Every limit fermata enforces, in one place, with its unit in its name. Relations between
// limits are asserted when this module loads, so an edit that breaks one fails at start-up.
import assert from 'node:assert/strict';

const KiB = 1024;
const MiB = 1024 * KiB;

export const walLimits = {
  /** A segment is sealed and a new one started once the next group would pass this size. */
  segmentBytes: 64 * MiB,
  /** Largest record body the log accepts (an Arrow batch from ingest is one record). */
  recordBodyBytesMax: 32 * MiB,
  /** One group commit writes at most this many bytes (one writev + one fdatasync). */
  groupBytesMax: 8 * MiB,
  /**
   * Groups being written at once on a write-through segment: the next group's write starts
   * while the one ahead of it is still going to disk (its records carry the overlapped flag),
   * and is acknowledged after it. 1 = one at a time. Without write-through it is always one.
   */
  writesInFlightMax: 2,
  /** How long the committer may wait for more appends before writing a group; 0 = never wait. */
  groupWaitMsMax: 0,
  /** Bytes queued behind the committer; past this, append rejects with WAL_QUEUE_FULL. */
  queueBytesMax: 256 * MiB,
  /** A group's sync (its fdatasync, or its write on a write-through segment) slower than this is logged and counted as slow. */
  slowSyncMs: 1000,
} as const;

export type WalLimits = { -readonly [K in keyof typeof walLimits]: number };

export function assertWalLimits(limits: WalLimits): void {
  assert.ok(Number.isSafeInteger(limits.segmentBytes) && limits.segmentBytes >= 4 * KiB, 'segmentBytes must be at least 4 KiB');
  assert.ok(limits.recordBodyBytesMax >= 1, 'recordBodyBytesMax must be positive');
  assert.ok(limits.recordBodyBytesMax <= 2 ** 30, 'recordBodyBytesMax must not pass the format maximum (2^30)');
  assert.ok(limits.groupBytesMax >= 1, 'groupBytesMax must be positive');
  assert.ok(limits.queueBytesMax >= limits.recordBodyBytesMax, 'queueBytesMax must hold the largest record');
  assert.ok(limits.groupWaitMsMax >= 0, 'groupWaitMsMax must not be negative');
  // Recovery accepts a torn group followed by one overlapped group, no more (docs/format/wal.md).
  assert.ok(limits.writesInFlightMax === 1 || limits.writesInFlightMax === 2, 'writesInFlightMax must be 1 or 2');
}

assertWalLimits(walLimits);

export const timerLimits = {
  /** Rows one batch (one WAL record) may hold. */
  rowsPerBatchMax: 100_000,
  /** Bytes of one timer's payload (its delivery body). */
  payloadBytesMax: 1 * MiB,
  /** Bytes of an idempotency key (docs/api.md: ≤ 256). */
  keyBytesMax: 256,
  /** Extra delivery headers one timer may carry. */
  headerCountMax: 32,
  /** Bytes of one timer's headers as JSON text. */
  headersBytesMax: 8 * KiB,
  /** Bytes of a target URL. */
  targetBytesMax: 2 * KiB,
  /** Bytes of a queue name. */
  queueNameBytesMax: 64,
  /** How far ahead a timer may be set: 10 years, in ms. */
  horizonMsMax: 10 * 366 * 24 * 3600 * 1000,
  /** Timers one bulk cancel takes at most: its one CANCEL_BULK record (24 bytes a spilled timer) stays within recordBodyBytesMax. */
  bulkCancelTimersMax: 1_000_000,
} as const;

export type TimerLimits = { -readonly [K in keyof typeof timerLimits]: number };

assert.ok(timerLimits.rowsPerBatchMax < 2 ** 24, 'a row must fit the 24-bit row field of an id');
assert.ok(timerLimits.payloadBytesMax <= walLimits.recordBodyBytesMax, 'one timer must fit a WAL record');
assert.ok(16 + timerLimits.bulkCancelTimersMax * 24 <= walLimits.recordBodyBytesMax, 'a bulk cancel\'s largest record fits a WAL record');

export const coalesceLimits = {
  /**
   * One-timer admits arriving in one event-loop turn share one ADD record, up to this many rows.
   * A full record is logged at once (when the log is idle) while the turn gathers the next, so
   * many admitters in a closed loop move as cohorts, one's record being written while another's
   * answers are handled: with 256 admitters, two cohorts. Measured against 1024 (a turn's
   * admits in one record, written after the turn): 256 single admitters in process 267,000 and
   * 289,000/s against 232,000 and 237,000; `fermata bench --mode stream`, 256 in flight, 217,000
   * and 230,000/s against 187,000 and 194,000.
   */
  rowsMax: 128,
  /** …and up to this many payload, header and key bytes (a merged record stays far below recordBodyBytesMax). */
  bytesMax: 4 * MiB,
} as const;

assert.ok(coalesceLimits.rowsMax >= 1 && coalesceLimits.rowsMax <= timerLimits.rowsPerBatchMax, 'a merged batch is a batch: at most rowsPerBatchMax rows');
assert.ok(coalesceLimits.bytesMax * 2 <= walLimits.recordBodyBytesMax, 'a merged batch (plus one more timer) fits a WAL record');

export const schedulerLimits = {
  /** Timers handed to the dispatcher in one slice; the event loop runs between slices. */
  sliceTimersMax: 1024,
  /** Timers released per second at most (a token bucket): a restart after downtime finds
   * every overdue timer due at once, and they go out at this rate, not all together. The
   * dispatcher's room (deliveries in flight) is the tighter bound in practice; this one is set
   * above what Arrow batch delivery sustains, so it only caps a runaway. */
  releasePerSecondMax: 2_000_000,
  /** The longest the scheduler sleeps before looking at the wall clock again (clock jumps). */
  sleepMsMax: 1000,
} as const;

export type SchedulerLimits = { -readonly [K in keyof typeof schedulerLimits]: number };

/** A schedule's rule (engine/schedules/): what compileRule accepts, and what its caches keep. */
export const scheduleRuleLimits = {
  /** The shortest every_ms: a schedule is not a busy loop. */
  everyMsMin: 1000,
  /** The longest every_ms: as far ahead as a timer may be set. */
  everyMsMax: timerLimits.horizonMsMax,
  /** The longest jitter_ms: one day (an occurrence fires at most this late on purpose). */
  jitterMsMax: 24 * 3600 * 1000,
  /** Characters of a cron expression (six fields of lists fit many times over). */
  cronCharsMax: 256,
  /** Occurrences one after() call answers at most: its cost is bounded by the caller's ask. */
  occurrencesPerCallMax: 1000,
  /** Compiled cron patterns kept (engine/schedules/cron-cache.ts): each holds a table of 10,000 years; schedules of one expression and zone share one. */
  compiledCronsCachedMax: 256,
  /** Time zone names checked with Intl and remembered (the checks build a DateTimeFormat, most of a compile's cost). */
  zoneNamesCachedMax: 2048,
  /** (zone, year) tables of offset changes kept (about a hundred Intl reads each to build; a few changes each). */
  zoneYearsCachedMax: 4096,
} as const;

export const httpLimits = {
  /** SIGTERM waits this long for requests in flight before closing their connections. */
  drainTimeoutMs: 10_000,
  /** A connection that has not shown its protocol by then is closed. */
  sniffTimeoutMs: 10_000,
  /** An idle HTTP/1.1 keep-alive connection is closed after this (above common load-balancer idle timeouts, as fastify's own default). */
  http1KeepAliveTimeoutMs: 72_000,
  /** HTTP/1.1 request headers must arrive within this (Node's default, made explicit: slow-loris bound). */
  http1HeadersTimeoutMs: 60_000,
  /** A whole HTTP/1.1 request must arrive within this (Node's default, made explicit). */
  http1RequestTimeoutMs: 300_000,
  /** An HTTP/2 session without any activity for this long is closed (GOAWAY), as fastify's own default. */
  http2SessionIdleTimeoutMs: 72_000,
  /** Streams one HTTP/2 client may have open at once (advertised in SETTINGS). */
  http2ConcurrentStreamsMax: 256,
  /** Bytes of one request's header list, HTTP/1.1 and HTTP/2 alike (HPACK-decoded size for HTTP/2). */
  headerListBytesMax: 32 * KiB,
  /** Header fields of one request. */
  headerFieldsMax: 128,
  /**
   * Bytes a client may send on one HTTP/2 stream (SETTINGS_INITIAL_WINDOW_SIZE), and on a whole
   * session, before the server's next WINDOW_UPDATE; the session's window is raised as it
   * starts. With HTTP/2's 65,535-byte default a 1.4 MB Arrow batch waits for some 22 updates,
   * each one a turn of the server's event loop, which is busy admitting the batch before it:
   * measured, 10,000-row batches acknowledged one at a time took 8–9.5 ms (p50) with the
   * defaults and 6.6–7.1 ms with these. The session's window bounds what a client can have
   * sent and not yet read, across all its streams.
   */
  http2StreamWindowBytes: 2 * MiB,
  http2SessionWindowBytes: 16 * MiB,
  /** MB an HTTP/2 session may buffer (header tables, unsent data) before new streams are refused. */
  http2SessionMemoryMbMax: 32,
  /** Malformed frames, and streams refused or reset by the client, one session may send before it is closed (rapid reset, floods). */
  http2SessionInvalidFramesMax: 100,
  http2SessionRejectedStreamsMax: 100,
  /**
   * Streams an HTTP/2 client may reset (RST_STREAM) at once before its session is closed
   * (rapid reset, CVE-2023-44487): nghttp2's token bucket, node's `streamResetBurst`. Twice the
   * streams a client may have open, so a client whose every open stream times out, twice
   * before the bucket refills, is still served; nghttp2's default is 1,000.
   */
  http2StreamResetBurst: 512,
  /** Resets per second the bucket refills (node's `streamResetRate`): nghttp2's default, far above a client that cancels now and then. */
  http2StreamResetsPerSecond: 33,
} as const;

assert.ok(httpLimits.http2StreamResetBurst >= httpLimits.http2ConcurrentStreamsMax, 'a client that cancels every stream it has open is not closed for it');

/**
 * The per-peer penalty (ingest/http/listen/peer-penalty.ts): a connection the server closed for abuse
 * (an HTTP/2 session past a limit above: resets, invalid frames, refused streams, a CONTINUATION
 * flood; an HTTP/1.1 header block past headerListBytesMax) is an offence of its peer address
 * (an IPv6 peer is its /64). A peer with enough offences has its new connections refused for a
 * cool-down that doubles on each repeat, and its open ones closed.
 */
export const peerPenaltyLimits = {
  /** Offences within offenceWindowMs that start a first penalty: one or two (a client that hit a limit once, and retried) are not a pattern. */
  offencesBeforePenalty: 3,
  offenceWindowMs: 60_000,
  /** The first cool-down; each later penalty of a remembered peer doubles it… */
  coolDownMsMin: 10_000,
  /** …up to this. */
  coolDownMsMax: 10 * 60_000,
  /** A penalised peer is remembered this long after its cool-down ends: an offence in that time penalises again at once, for twice as long. */
  peerMemoryMs: 60 * 60_000,
  /** Peers remembered at most (about 100 B each); past it the least recently offending is forgotten. */
  peersMax: 10_000,
  /** Warn lines about penalised peers per minute at most; the rest are counted in the next line and in /metrics. */
  logLinesPerMinuteMax: 60,
} as const;

export type PeerPenaltyLimits = { -readonly [K in keyof typeof peerPenaltyLimits]: number };

export function assertPeerPenaltyLimits(limits: PeerPenaltyLimits): void {
  assert.ok(Number.isSafeInteger(limits.offencesBeforePenalty) && limits.offencesBeforePenalty >= 1, 'offencesBeforePenalty must be a whole number ≥ 1');
  assert.ok(limits.offenceWindowMs > 0, 'offenceWindowMs must be positive');
  assert.ok(limits.coolDownMsMin > 0 && limits.coolDownMsMin <= limits.coolDownMsMax, 'cool-downs grow from min to max');
  assert.ok(limits.peerMemoryMs >= 0, 'peerMemoryMs must not be negative');
  assert.ok(Number.isSafeInteger(limits.peersMax) && limits.peersMax >= 1, 'peersMax must be a whole number ≥ 1');
  assert.ok(limits.logLinesPerMinuteMax >= 1, 'at least one warn line a minute');
}

assertPeerPenaltyLimits(peerPenaltyLimits);

export const storeLimits = {
  /**
   * Resident timers at most, unless the store is given another capacityMax (`fermata serve`
   * gives it residentSlotsFor(budget), never less than this); past it admits get CAPACITY_FULL
   * (503). A log replayed at open may pass it: the limit then rises to what it holds.
   */
  residentTimersMax: 2 ** 24,
  /** Slots allocated up front; the columns double as timers arrive. */
  residentTimersInitial: 1024,
  /** Payload and headers bytes are appended to slabs of this size (a larger string gets its own). */
  arenaSlabBytes: 4 * MiB,
  /** Compaction moves strings out of slabs whose live share fell below this. */
  arenaCompactLiveRatio: 0.5,
} as const;

assert.ok(storeLimits.residentTimersMax <= 2 ** 28, 'a store handle carries the slot in 28 bits');

export const retentionDefaults = {
  /** A delivered or cancelled timer stays (GET answers, its key deduplicates) this long. */
  finishedMs: 24 * 3600 * 1000,
  /** A dead timer stays (listed, redrivable, its key deduplicates) this long. */
  deadMs: 7 * 24 * 3600 * 1000,
} as const;

export type Retention = { -readonly [K in keyof typeof retentionDefaults]: number };

export const ingestLimits = {
  /** Largest request body of a bulk add (Arrow IPC stream or NDJSON); past it the answer is 413, read no further. */
  bodyBytesMax: 64 * MiB,
  /** Largest application/json body (one timer, a queue config): JSON is parsed whole into objects, so it gets less room. */
  jsonBodyBytesMax: 4 * MiB,
  /**
   * The smallest number a client's `fire_at` may be as epoch ms (a JSON number, an Arrow Int64
   * column): 10^12 ms is 2001-09-09, while 10^12 as seconds is 33,658 AD, so a smaller number is
   * almost surely epoch seconds and is refused rather than delivered at once. An RFC 3339 string
   * or an Arrow Timestamp says its own unit and is not held to it.
   */
  fireAtEpochMsMin: 1_000_000_000_000,
} as const;

assert.ok(ingestLimits.jsonBodyBytesMax <= ingestLimits.bodyBytesMax, 'a JSON body is never allowed more than a bulk one');
assert.ok(ingestLimits.jsonBodyBytesMax >= 2 * timerLimits.payloadBytesMax, 'one timer with the largest payload fits a JSON body, base64-encoded');

export const deliveryLimits = {
  /** A target's Retry-After is honoured up to this long: a broken or hostile target cannot park a timer for years. */
  retryAfterMsMax: 24 * 3600 * 1000,
  /** Secrets one webhook signer holds (each signs every delivery): rotation needs two, a few more is a slip. */
  signingSecretsMax: 8,
  /** A failed attempt's error text (last_error) is cut to this many UTF-8 bytes: the OUTCOME record and memory hold at most this much of it. */
  lastErrorBytesMax: 256,
  /** Dead timers logged at warn a second at most; the rest of that second are counted in one summary line. */
  deadLogLinesPerSecondMax: 10,
} as const;

assert.ok(deliveryLimits.retryAfterMsMax > 0 && Number.isSafeInteger(deliveryLimits.retryAfterMsMax), 'retryAfterMsMax must be a positive whole number of ms');
assert.ok(deliveryLimits.lastErrorBytesMax >= 64 && deliveryLimits.lastErrorBytesMax <= 0xffff, 'an error text\'s length is a u16 in the OUTCOME record');
assert.ok(deliveryLimits.signingSecretsMax >= 2, 'rotation signs with an old and a new secret at once');

export const readinessLimits = {
  /** /readyz turns red when the data directory's file system has fewer bytes free (for an
   * unprivileged writer) than this: as much as the log may hold queued, so a load balancer that
   * stops sending at red still leaves room to write all of it. */
  diskFreeBytesMin: walLimits.queueBytesMax,
  /** Free space is read at most this often; /readyz answers from the last reading in between. */
  diskCheckIntervalMs: 1000,
  /** The bytes the data directory's files take (GET /v1/stats) are measured at most this often: a walk of its files. */
  dataDirMeasureIntervalMs: 10_000,
} as const;

assert.ok(readinessLimits.diskCheckIntervalMs > 0, 'diskCheckIntervalMs must be positive');

export const serviceLimits = {
  /** After a poisoned log, `fermata serve` opens the data directory again at once; while that fails (the disk still failing), it waits this long, doubling… */
  reopenDelayMsMin: 250,
  /** …up to this, so it serves again within seconds of the disk recovering. */
  reopenDelayMsMax: 4_000,
  /** After a poison by a full disk, the directory is opened again once at least this much is free (and the free-space minimum): less would fail at once again. */
  reopenFreeBytesMin: 8 * 1024 * 1024,
  /** A poisoned life's ports are handed to the next: how long to wait for them to close before binding anyway. */
  portReleaseWaitMsMax: 2_000,
} as const;

assert.ok(serviceLimits.reopenDelayMsMin > 0 && serviceLimits.reopenDelayMsMin <= serviceLimits.reopenDelayMsMax, 'reopen delays grow from min to max');

export const dispatchLimits = {
  /**
   * Timers in flight across all queues, single deliveries and rows of "arrow" batches alike; the
   * scheduler hands out no more than this room. Rows of Arrow batches are cheap (a few hundred
   * bytes each in a task, one request for thousands): at 32,768, three 10,000-row batches were
   * in flight at most. With four times the room (single deliveries kept to requestsInFlightMax),
   * the second half of a 200,000-timer drain ran at 726,000–1,216,000/s in four runs against
   * 543,000–773,000 (the whole drains did not move: the first batches' cold start rules them).
   */
  inFlightMax: 131_072,
  /** Single deliveries ("request" queues, one HTTP request each) in flight across all queues. */
  requestsInFlightMax: 32_768,
  /** Bytes the tasks in flight may hold (each timer's payload, headers, key, target and id): 32,768 one-MiB payloads would be 32 GiB. */
  inFlightBytesMax: 256 * MiB,
  /**
   * Deliveries in flight for one "request" queue without its own max_concurrent, at most, as a
   * share of requestsInFlightMax: a queue stuck on a slow target leaves the rest of the room to
   * other queues.
   */
  queueInFlightShareMax: 0.25,
  /**
   * "request" queues' timers are handed to a worker up to this long before they are due; the
   * worker holds each until the wall clock reaches its time. The main thread's turns (GC,
   * logging outcomes) and the trip to the worker then happen before the fire time, not after.
   */
  takeAheadMs: 20,
  /**
   * A delivery worker's young generation (V8's new space, both semi-spaces), MiB. A scavenge
   * stops the worker's event loop, and the HTTP/2 streams of requests in flight survive it: with
   * V8's default size (semi-spaces grown to 16 MiB) scavenges took 5–25 ms at 5,000 deliveries a
   * second, and timers due meanwhile went out that late. At 10 MiB they take 1–3 ms (more of
   * them); fire lateness p99 fell from 13–20 ms to 5–9 ms in alternated quick bench runs, and
   * with V8's pool at one helper (bin/v8-pool.js) it was 3–4 ms against 6–13 at V8's own sizing.
   */
  workerYoungGenerationMb: 10,
  /** Timers in one task sent to a delivery worker (one transfer each way, one OUTCOME record). */
  timersPerTaskMax: 256,
  /**
   * Buffers of "arrow" tasks handed back by the workers and kept for later tasks
   * (dispatch/buffer-pool.ts), in bytes at most: fresh pages for each 10,000-row batch's few MiB
   * were a fifth of the main thread's time in the dispatch bench's Arrow drain.
   */
  taskBuffersPooledBytesMax: 64 * MiB,
  /** Kept buffers are let go after this long without a task taking one. */
  taskBuffersIdleMs: 30_000,
  /** A task's payload column is allocated at most this large up front; a fuller task grows it by doubling. */
  taskBytesInitialMax: 16 * MiB,
  /** An HTTP/2 session to a target unused this long is closed. */
  sessionIdleMsMax: 5 * 60_000,
  /** A target's DNS lookup, at most; past it the delivery fails as a network error and is retried. */
  dnsLookupTimeoutMs: 5_000,
  /** TCP connect plus TLS and HTTP/2 handshakes to a target, at most. */
  connectTimeoutMs: 10_000,
  /**
   * HTTP/2 streams in flight to one target origin from one worker, and never more than the
   * target's SETTINGS_MAX_CONCURRENT_STREAMS. 1,024 rather than 256: at half the per-request rate
   * a local sink's own pauses (tens of ms) filled 256 streams, and timers then waited in the
   * worker's line past their fire time (bench/README.md, "a sink's pauses and the per-origin cap").
   */
  requestsPerOriginMax: 1024,
  /** HTTP/1.1 sockets (one request each) in flight to one target origin from one worker. */
  socketsPerOriginMax: 256,
  /** Idle time before TCP keepalive probes a target's connection. */
  tcpKeepAliveDelayMs: 30_000,
  /** After a request times out, its HTTP/2 session must answer a PING within this, or it is dropped (a silent peer). */
  sessionPingTimeoutMs: 5_000,
  /** Shutdown waits this long for deliveries in flight to finish and be recorded. */
  drainTimeoutMs: 30_000,
  /** A start's warm-up opens sessions to the origins of timers due within this (dispatch/delivery-warm-up.ts). */
  warmUpHorizonMs: 60_000,
  /** It looks at this many of those timers at most, and opens sessions to this many origins at most. */
  warmUpTimersMax: 100_000,
  warmUpOriginsMax: 256,
  /** A worker waits this long at most for those sessions before it says it is warm; the rest connect meanwhile. */
  warmUpConnectWaitMs: 1_000,
  /** The warm-up is over after this whatever its workers say (one that never answers costs speed, not a start). */
  warmUpAnswerWaitMs: 10_000,
} as const;

export type DispatchLimits = { -readonly [K in keyof typeof dispatchLimits]: number };

assert.ok(dispatchLimits.timersPerTaskMax >= 1 && dispatchLimits.timersPerTaskMax <= dispatchLimits.inFlightMax, 'a task holds at least one timer and no more than may be in flight');

export const spillLimits = {
  /** Width of a spill bucket: timers due within one such window share a run's record batch (docs/format/spill.md). */
  bucketWidthMs: 3600 * 1000,
  /** One run batch holds at most this many variable-width bytes plus 66 bytes a row; a larger bucket is cut into several batches. Bounds what one bucket read or one compaction input holds in memory. */
  batchBytesMax: 64 * MiB,
  /** Rows one run batch holds at most. */
  batchRowsMax: 1_000_000,
  /** Largest MANIFEST a reader accepts (it is read whole). */
  manifestBytesMax: 256 * MiB,
  /** Tombstones added since the last merge that stay in a small sorted side list; past it they are merged into the main columns. */
  tombstonesRecentMax: 4096,
  /** The engine's filter over spilled key hashes (one bit a hash value) starts at this many bytes… */
  keyFilterBytesMin: 4 * KiB,
  /** …and grows to keep at least this many bits per spilled keyed timer (8: about 1 byte a timer, few false hits). */
  keyFilterBitsPerKey: 8,
  /** Decoded spill batches the engine keeps cached (each at most batchBytesMax plus 66 bytes a row). */
  bucketCacheMax: 4,
  /** A run being written is fdatasynced each time this many more bytes of it are written (and at its end). */
  runSyncBytes: 32 * MiB,
  /** A checkpoint copies timers into its runs, and evicts those it spilled, this many at a time, yielding to the event loop between slices. */
  checkpointSliceRows: 16_384,
} as const;

export type SpillLimits = { -readonly [K in keyof typeof spillLimits]: number };

assert.ok(Number.isSafeInteger(spillLimits.bucketWidthMs) && spillLimits.bucketWidthMs >= 1000, 'bucketWidthMs must be a whole number of ms, at least a second');
assert.ok(spillLimits.batchBytesMax >= timerLimits.payloadBytesMax * 2 && spillLimits.batchBytesMax <= 2 ** 30, 'a batch holds the largest timer and keeps Arrow\'s i32 offsets far from overflow');
assert.ok(spillLimits.batchRowsMax >= 1 && spillLimits.batchRowsMax < 2 ** 31, 'batchRowsMax must fit an Arrow length');
assert.ok(spillLimits.tombstonesRecentMax >= 1, 'tombstonesRecentMax must be positive');
assert.ok(spillLimits.keyFilterBytesMin >= 1 && (spillLimits.keyFilterBytesMin & (spillLimits.keyFilterBytesMin - 1)) === 0, 'the key filter is a power of two bytes');
assert.ok(spillLimits.keyFilterBitsPerKey >= 1 && spillLimits.bucketCacheMax >= 1, 'keyFilterBitsPerKey and bucketCacheMax must be positive');

export const memoryLimits = {
  /** Share of the memory limit (cgroup, machine or --memory-budget) that resident timers may take; Node, buffers in flight and the OS get the rest. */
  residentShare: 0.5,
  /** A spilled bucket is promoted at least this long before it starts, so loading never makes a timer late. */
  promoteLeadMs: 10 * 60_000,
  /** Below this share of the budget, the loader promotes buckets ahead of need (up to promoteAheadMsMax past now). */
  promoteBelowShare: 0.6,
  /** How far ahead of now the loader promotes when memory allows. */
  promoteAheadMsMax: 24 * 3600 * 1000,
  /** Past this share of the budget, the loader spills: a checkpoint with a lower watermark. */
  demoteAboveShare: 1.0,
  /** After spilling, what the resident window is sized to, as a share of the budget and of the slot limit (room to grow before the next spill). */
  demoteToShare: 0.5,
  /**
   * Past this share of the resident store's slot limit (Engine.stats().residentMax:
   * storeLimits.residentTimersMax unless the store was given another capacityMax), the
   * loader spills too, whatever the bytes: adds past the limit are refused with 503, and the
   * loader looks only once a loaderIntervalMs, so it starts well before (a quarter of the limit
   * is about 4 s of Arrow ingest at 1,000,000 timers/s).
   */
  demoteAboveSlotShare: 0.75,
  /** A checkpoint is written once the log has grown this much since the last one (the WAL stays bounded). */
  checkpointWalBytes: 256 * MiB,
  /**
   * …and once it has grown by at least this many bytes per byte of resident timers. Each
   * checkpoint rewrites every resident timer (the resident snapshot run), so with a large
   * resident set a fixed log size made each admitted timer pay for rewriting many others
   * (measured: 40% of the CPU of a 3,000,000-timer Arrow ingest). Scaled, a checkpoint rewrites
   * about as many bytes as were logged since the last one, whatever the resident count; the log
   * then stays below the memory budget's size (plus checkpointWalBytes).
   */
  checkpointWalPerResidentByte: 1,
  /**
   * Timers due this far ahead and more are spilled whatever the budget, once the service is quiet
   * (the far-future promise: they cost almost no memory). The watermark goes to the end of the
   * bucket holding now + farHorizonMs. Infinity keeps the far future resident while the budget allows.
   */
  farHorizonMs: 3600 * 1000,
  /** The service is quiet when at most this many timers were added or settled over a loader step… */
  farSpillQuietRowsMax: 1000,
  /** …for this many steps in a row: a far-future spill never takes the main thread from a burst of adds or deliveries. */
  farSpillQuietSteps: 2,
  /**
   * …and never starts with a delivery due within this long: a checkpoint of millions of timers
   * takes seconds, and holds the main thread for tens of ms at a time (compare runs whose far
   * spill was still going when a lateness run's timers fell due had them 40–57 ms late at p99,
   * against about 4; timers added while a spill runs still pay that). A service that always has
   * deliveries this close keeps the far future in memory while its budget allows, as it did
   * before the far horizon.
   */
  farSpillDueClearMs: 60_000,
  /** A far-future spill waits until this many bytes of resident timers are due past the far horizon… */
  farSpillBytesMin: 4 * MiB,
  /** …and at least this share of the resident timers that stay (a checkpoint rewrites those too). */
  farSpillPerKeptByte: 0.25,
  /**
   * After a spill of at least this many timers the loader asks for a full collection and for
   * the memory it frees to go back to the kernel (runtime/garbage-collector.ts, when it was given the
   * means): their copies in the heap, and the checkpoint's own buffers, are garbage the process
   * would otherwise keep until ingest next fills the heap, and glibc keeps what it frees (the
   * VmRSS growth of a fill of 1,000,000 far-future timers, once spilled: 470 B a timer with
   * neither, 360 B after one 25 ms collection, 51 B after a last-resort collection and
   * malloc_trim). The return holds the main thread 80–130 ms after a far-future spill, against a
   * checkpoint of 50,000 timers or more that took seconds of its turns.
   */
  collectAfterSpilledRows: 50_000,
  /**
   * After a checkpoint, the store's columns are made again to fit the timers that stayed once
   * they are at least this many times larger than those need (a spill took most of them); the
   * new capacity holds twice the timers. A shrink costs a pass over the slots and a rebuild of
   * the id and key indexes, so it waits for a large gap, which also keeps a store that
   * oscillates around one size from shrinking and growing in turn.
   */
  residentShrinkShare: 8,
  /** Columns of more slots than this shrink only when no delivery is due within residentShrinkDueClearMs (a shrink over 2^22 slots held the main thread 20–70 ms). */
  residentShrinkBusySlots: 2 ** 20,
  residentShrinkDueClearMs: 1000,
  /**
   * While the service is quiet (farSpillQuietSteps), the loader hands the memory malloc holds
   * free back to the kernel at most this often (malloc_trim: glibc keeps what is freed inside
   * its heaps, where jemalloc and tcmalloc purge it in the background). At rest the process
   * still frees memory now and then (V8's collections, requests served): after the compare
   * fill its main heap grew 6–12 MB at a time every ten seconds or so and kept it. Trimmed every
   * 10 s, VmRSS at rest swung 163–190 MB; every second, it stays within a MB of its level but
   * for single readings (a trim, 0.7–1 ms when there is little to give back, each second of
   * quiet).
   */
  idleTrimIntervalMs: 1000,
  /** How often the loader looks at memory, the clock and the log. */
  loaderIntervalMs: 1000,
  /** Past this many spilled runs, a checkpoint merges them into one (each lookup and promotion reads every run). */
  spilledRunsMax: 8,
  /** After a checkpoint evicts timers, the arena is compacted when its live bytes fall below this share of what it holds. */
  arenaLiveShareMin: 0.5,
  /** A checkpoint also merges the runs once there are more tombstones than this share of the spilled timers, and more than tombstonesCompactMin. */
  tombstonesCompactShare: 0.1,
  tombstonesCompactMin: 1024,
} as const;

export type MemoryLimits = { -readonly [K in keyof typeof memoryLimits]: number };

assert.ok(memoryLimits.residentShare > 0 && memoryLimits.residentShare <= 1, 'residentShare is a share');
assert.ok(memoryLimits.demoteToShare < memoryLimits.demoteAboveShare && memoryLimits.promoteBelowShare < memoryLimits.demoteAboveShare, 'the loader promotes and demotes at different levels, or it would flap');
assert.ok(memoryLimits.demoteToShare < memoryLimits.demoteAboveSlotShare && memoryLimits.demoteAboveSlotShare < 1, 'spilling by slots starts below the limit and leaves room under it');
assert.ok(memoryLimits.farHorizonMs >= memoryLimits.promoteLeadMs, 'the far horizon lies past what the loader promotes, or they would flap');
assert.ok(memoryLimits.promoteLeadMs > memoryLimits.loaderIntervalMs, 'the loader looks often enough to promote before the lead runs out');

/** Schedules (engine/schedules/): what the materializer creates ahead, and in what steps. */
export const scheduleLimits = {
  /**
   * Occurrences due within this much of now are created ahead (besides each schedule's next
   * one, always): two minutes covers a restart or a stalled minute, and keeps a schedule of one
   * a second at 120 pending timers.
   */
  createAheadMs: 120_000,
  /** Occurrences of all schedules in one ADD record, roughly (one schedule's wake may take it past). */
  batchRowsMax: 4096,
  /** Occurrences one schedule creates in one wake (catch_up all after a long downtime goes on at the next). */
  occurrencesPerWakeMax: 1000,
  /** Occurrences asked of a rule at a time while filling the window. */
  aheadChunk: 16,
  /** Schedules the materializer looks at in one turn of the event loop (a few µs each): at open, a million are due at once. */
  schedulesPerTurnMax: 512,
  /** The longest the materializer sleeps: the real clock may step, so it looks at least this often. */
  sleepMsMax: 1000,
  /**
   * The shortest it sleeps after a run: the schedules falling due meanwhile are taken up together,
   * one ADD record for several of them rather than one each (a million hourly schedules fall due
   * 280 times a second). Their occurrences are at least the window ahead, or the one just fired's
   * next: a few ms later changes nothing, and a change or a clock move wakes it at once.
   */
  wakeCoalesceMs: 20,
  /** After a batch was refused (a full store, a failed log), its schedules are looked at again this much later. */
  retryAfterMs: 1000,
  /** Overdue occurrences read a page at a time when catching up. */
  pageRows: 1000,
  /** A schedule's name: this many bytes at most. */
  nameBytesMax: 128,
  /** GET /v1/schedules: the most a page lists, and the default. */
  listLimitMax: 1000,
  listLimitDefault: 100,
  /** How many occurrences a schedule's view shows ahead. */
  nextShown: 5,
} as const;
/** The PostgreSQL log of cluster mode (engine/pg-log/). */
export const pgLogLimits = {
  /** Largest record body the log accepts: the local WAL's, so an engine's batches fit either log. */
  recordBodyBytesMax: walLimits.recordBodyBytesMax,
  /** One transaction carries at most this many body bytes (at least one record). */
  groupBytesMax: 8 * MiB,
  /** Transactions under way at once, each on its own connection; they commit in order. */
  transactionsInFlightMax: 3,
  /** Bytes queued behind the transactions; past this, append rejects with WAL_QUEUE_FULL. */
  queueBytesMax: 256 * MiB,
  /** Rows fetched per round trip when records are read back (replay, records()). */
  readRowsPerFetch: 64,
  /** A transaction slower than this (start to commit) is logged and counted as slow. */
  slowCommitMs: 1000,
} as const;

export type PgLogLimits = { -readonly [K in keyof typeof pgLogLimits]: number };

export function assertPgLogLimits(limits: PgLogLimits): void {
  assert.ok(limits.recordBodyBytesMax >= 1 && limits.recordBodyBytesMax < 2 ** 30, 'recordBodyBytesMax must be positive and below bytea\'s 1 GiB');
  assert.ok(limits.groupBytesMax >= 1, 'groupBytesMax must be positive');
  assert.ok(limits.queueBytesMax >= limits.recordBodyBytesMax, 'queueBytesMax must hold the largest record');
  assert.ok(Number.isInteger(limits.transactionsInFlightMax) && limits.transactionsInFlightMax >= 1, 'transactionsInFlightMax must be a positive integer');
  assert.ok(Number.isInteger(limits.readRowsPerFetch) && limits.readRowsPerFetch >= 1, 'readRowsPerFetch must be a positive integer');
}

assertPgLogLimits(pgLogLimits);

/** The ring of one-second samples behind GET /v1/stats/series and /v1/events (engine/stats-series.ts). */
export const statsSeriesLimits = {
  /** One sample every this many ms. */
  sampleIntervalMs: 1000,
  /** Samples kept: 15 minutes of them. */
  samplesMax: 900,
} as const;

assert.ok(statsSeriesLimits.sampleIntervalMs * statsSeriesLimits.samplesMax === 15 * 60 * 1000, 'the series holds 15 minutes');
