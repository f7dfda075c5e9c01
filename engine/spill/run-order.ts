// The order a checkpoint writes timers into a run: by (dueAt, seq, row), as docs/format/spill.md
// requires. A checkpoint orders every resident timer (up to 2^24) while the engine keeps
// serving, so this is built for that: a counting pass by spill bucket, then each bucket sorted
// by a numeric key (dueAt's offset in the bucket and the position, packed in one float64), which
// a typed array sorts natively, with no comparator call per comparison; only timers due in the
// same ms are then compared by (seq, row). It yields (await pause()) every `sliceRows` rows
// sorted, and every 16 times that many rows of a pass over them, so no turn of the event loop
// holds more than about that.

/** The columns ordered: row i is a timer due at dueAt[i], logged as row row[i] of record logSeq[i]. */
export interface RunOrderColumns {
  readonly dueAt: ArrayLike<number>;
  readonly logSeq: ArrayLike<number>;
  readonly row: ArrayLike<number>;
}

/** Buckets spanned that a typed array counts directly; a wider spread is counted by rank. */
const tallySpanMax = 2 ** 20;
/** Keys are exact below 2^53: offset in bucket × span of positions + position. */
const exactKeyMax = 2 ** 53;
/** A pass over every timer (no sorting in it) pauses once every this many slices' worth of rows. */
const passRowsPerSlice = 16;

/** The positions of `columns`' timers in (dueAt, seq, row) order; `widthMs` is the spill bucket width. */
export async function runOrder(columns: RunOrderColumns, widthMs: number, sliceRows: number, pause: () => Promise<void>): Promise<Int32Array> {
  const { dueAt } = columns;
  const n = dueAt.length;
  const order = new Int32Array(n);
  if (n === 0) return order;
  // The passes over every timer pause too, every passRows of them: at 8 million timers one
  // pass is a few hundred ms, most of it faulting in the arrays it fills.
  const passRows = sliceRows * passRowsPerSlice;
  const bucketOf = new Float64Array(n);
  let first = Infinity;
  let last = -Infinity;
  for (let i = 0; i < n; i++) {
    if (i > 0 && i % passRows === 0) await pause();
    const bucket = Math.floor((dueAt[i] as number) / widthMs);
    bucketOf[i] = bucket;
    if (bucket < first) first = bucket;
    if (bucket > last) last = bucket;
  }
  if (last - first >= tallySpanMax) {
    // Buckets spread too far for a tally over first..last (clocks gone astray): numbered by
    // their rank among the buckets present instead.
    const ranks = new Map([...new Set(bucketOf)].sort((a, b) => a - b).map((bucket, rank) => [bucket, rank]));
    for (let i = 0; i < n; i++) bucketOf[i] = ranks.get(bucketOf[i] as number) as number;
    first = 0;
    last = ranks.size - 1;
  }
  const segments = await byTally(bucketOf, first, last, order, passRows, pause);
  await pause();
  let largest = 0;
  for (let k = 0; k < segments.length; k += 2) largest = Math.max(largest, (segments[k + 1] as number) - (segments[k] as number));
  const scratch = { keys: new Float64Array(largest), positions: new Int32Array(largest) };
  let sortedSinceYield = 0;
  for (let k = 0; k < segments.length; k += 2) {
    const from = segments[k] as number;
    const to = segments[k + 1] as number;
    sortBucket(columns, order, from, to, Math.floor((dueAt[order[from] as number] as number) / widthMs) * widthMs, widthMs, scratch);
    sortedSinceYield += to - from;
    if (sortedSinceYield >= sliceRows) {
      sortedSinceYield = 0;
      await pause();
    }
  }
  return order;
}

/**
 * Places positions into `order` grouped by bucket number (first..last), buckets ascending, each
 * in position order (a counting sort); returns the groups as [from, to) pairs. Pauses
 * every `passRows` rows of each pass.
 */
async function byTally(bucketOf: Float64Array, first: number, last: number, order: Int32Array, passRows: number, pause: () => Promise<void>): Promise<number[]> {
  // ends[b - first] ends up as the end of bucket b's group.
  const ends = new Int32Array(last - first + 1);
  for (let i = 0; i < bucketOf.length; i++) {
    if (i > 0 && i % passRows === 0) await pause();
    ends[(bucketOf[i] as number) - first] = (ends[(bucketOf[i] as number) - first] as number) + 1;
  }
  let start = 0;
  for (let b = 0; b < ends.length; b++) {
    const count = ends[b] as number;
    ends[b] = start;
    start += count;
  }
  for (let i = 0; i < bucketOf.length; i++) {
    if (i > 0 && i % passRows === 0) await pause();
    const b = (bucketOf[i] as number) - first;
    const at = ends[b] as number;
    order[at] = i;
    ends[b] = at + 1;
  }
  const segments: number[] = [];
  let from = 0;
  for (let b = 0; b < ends.length; b++) {
    const to = ends[b] as number;
    if (to > from) segments.push(from, to);
    from = to;
  }
  return segments;
}

/** Sorts order[from, to), timers due in the bucket starting at `startMs`, by (dueAt, seq, row). */
function sortBucket(columns: RunOrderColumns, order: Int32Array, from: number, to: number, startMs: number, widthMs: number, scratch: { keys: Float64Array; positions: Int32Array }): void {
  const count = to - from;
  if (count < 2) return;
  const { dueAt, logSeq, row } = columns;
  const byDue = (a: number, b: number): number => (dueAt[a] as number) - (dueAt[b] as number) || (logSeq[a] as number) - (logSeq[b] as number) || (row[a] as number) - (row[b] as number);
  const segment = order.subarray(from, to);
  const span = 2 ** Math.ceil(Math.log2(count));
  if (widthMs * span >= exactKeyMax) {
    segment.sort(byDue);
    return;
  }
  // Whole ms into the bucket, then the index in the segment: equal offsets keep index order.
  const keys = scratch.keys.subarray(0, count);
  const positions = scratch.positions.subarray(0, count);
  positions.set(segment);
  for (let j = 0; j < count; j++) keys[j] = Math.floor((dueAt[positions[j] as number] as number) - startMs) * span + j;
  keys.sort();
  for (let j = 0; j < count; j++) segment[j] = positions[(keys[j] as number) % span] as number;
  // Timers due in the same whole ms are then put in order by (seq, row). Many are: a client
  // sending the same fire times batch after batch (a benchmark's h2load) has one per batch.
  let tieFrom = 0;
  for (let j = 1; j <= count; j++) {
    if (j < count && Math.floor((keys[j] as number) / span) === Math.floor((keys[tieFrom] as number) / span)) continue;
    if (j - tieFrom > 1) sortTies(columns, segment.subarray(tieFrom, j), keys.subarray(tieFrom, j), positions.subarray(tieFrom, j), byDue);
    tieFrom = j;
  }
}

/**
 * Sorts `group`, timers due in the same whole ms, by (dueAt, seq, row): when every dueAt is the
 * same, by one numeric key, their (seq, row) ranked in the group's ranges and the position in
 * the group, packed as sortBucket packs its keys; by `byDue` when dueAt differs in fractions
 * or the key would not be exact. `keys` and `positions` are scratch of the group's length.
 */
function sortTies(columns: RunOrderColumns, group: Int32Array, keys: Float64Array, positions: Int32Array, byDue: (a: number, b: number) => number): void {
  const { dueAt, logSeq, row } = columns;
  const due = dueAt[group[0] as number] as number;
  let seqMin = Infinity;
  let seqMax = -Infinity;
  let rowMax = 0;
  let sameDue = true;
  for (let j = 0; j < group.length && sameDue; j++) {
    const i = group[j] as number;
    const seq = logSeq[i] as number;
    if (seq < seqMin) seqMin = seq;
    if (seq > seqMax) seqMax = seq;
    if ((row[i] as number) > rowMax) rowMax = row[i] as number;
    sameDue = dueAt[i] === due;
  }
  const rows = rowMax + 1;
  const span = 2 ** Math.ceil(Math.log2(group.length));
  if (!sameDue || (seqMax - seqMin + 1) * rows * span >= exactKeyMax) {
    group.sort(byDue);
    return;
  }
  positions.set(group);
  for (let j = 0; j < group.length; j++) {
    const i = positions[j] as number;
    keys[j] = (((logSeq[i] as number) - seqMin) * rows + (row[i] as number)) * span + j;
  }
  keys.sort();
  for (let j = 0; j < group.length; j++) group[j] = positions[(keys[j] as number) % span] as number;
}
