// The engine's view of its log: append a record, get back a durable position; read records
// from a position. The local segmented WAL (engine/wal/) is the embedded implementation; a
// replicated log (NATS JetStream) can stand in later, so nothing above this interface may
// assume the log is a local file.

export interface LogRecord {
  /** Position in the log: 1, 2, 3, … with no gaps. */
  readonly seq: number;
  /** Record type, 1..255, defined by the engine; the log treats it as opaque. */
  readonly type: number;
  /** The bytes as appended (a view into the log's read buffer; copy to keep beyond the iteration). */
  readonly body: Uint8Array;
}

export interface AppendOptions {
  /**
   * Not refused when the queue of appends is full: records that settle work already accepted
   * (delivery outcomes, cancels) must not be turned away by back-pressure meant for new work.
   * They are small and bounded by the work in flight.
   */
  readonly pastQueueLimit?: boolean;
  /**
   * When the log is idle, this record's group is written at once, not after the current task
   * (appends made in the rest of the task ride the next group): for a record that is a full
   * batch on its own, whose write can be under way while the task gathers the next.
   */
  readonly startNow?: boolean;
}

export interface DurableLog {
  /**
   * Resolves with the record's sequence once it is durable; rejects with a coded error
   * otherwise. A body given as parts is stored as their concatenation.
   */
  append(type: number, body: Uint8Array | readonly Uint8Array[], options?: AppendOptions): Promise<number>;
  records(fromSeq?: number): AsyncIterable<LogRecord>;
  readonly lastSeq: number;
  close(): Promise<void>;
}
