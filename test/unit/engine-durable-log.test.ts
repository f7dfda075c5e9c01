// The DurableLog seam (engine/log.ts): the engine over a second log written here, in memory,
// that implements the interface and nothing more, through the contract tests every log runs
// (test/helpers/durable-log-contract.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import type { AppendOptions, DurableLog, LogCounters, LogOpener, LogRecord } from '../../engine/log.ts';
import { durableLogContract } from '../helpers/durable-log-contract.ts';

/** What outlives one engine: the records, as a database table would hold them. */
class MemoryLogTable {
  records: LogRecord[] = [];
  nextSeq = 1;
  /** Set: the next append of any log over this table fails as fenced. */
  fenced = false;
  truncations: number[] = [];
}

/**
 * A DurableLog in memory. Appends become durable after a delay of a few ms (a database round
 * trip), several at once, resolved in order.
 */
class MemoryLog implements DurableLog {
  readonly #table: MemoryLogTable;
  readonly #onPoisoned: ((poison: FermataError) => void) | undefined;
  readonly #counters = { appends: 0, syncs: 0, bytesWritten: 0, slowSyncs: 0 };
  #lastSeq: number;
  /** The last append's durability: the next resolves after it. */
  #tail: Promise<unknown> = Promise.resolve();
  #poison: FermataError | undefined;
  #closed = false;

  constructor(table: MemoryLogTable, onPoisoned: ((poison: FermataError) => void) | undefined) {
    this.#table = table;
    this.#onPoisoned = onPoisoned;
    this.#lastSeq = table.nextSeq - 1;
  }

  append(type: number, body: Uint8Array | readonly Uint8Array[], _options?: AppendOptions): Promise<number> {
    if (this.#poison !== undefined) return Promise.reject(this.#poison);
    if (this.#closed) return Promise.reject(new FermataError(errorCodes.walClosed, 'the log is closed'));
    if (this.#table.fenced) {
      this.#poison = new FermataError(errorCodes.logFenced, 'another owner holds the log');
      this.#onPoisoned?.(this.#poison);
      return Promise.reject(this.#poison);
    }
    const parts = body instanceof Uint8Array ? [body] : body;
    const copy = new Uint8Array(parts.reduce((bytes, part) => bytes + part.length, 0));
    let at = 0;
    for (const part of parts) {
      copy.set(part, at);
      at += part.length;
    }
    const seq = this.#table.nextSeq++;
    this.#counters.appends++;
    const durable = this.#tail.then(() => sleep(1 + (seq % 3))).then(() => {
      this.#table.records.push({ seq, type, body: copy });
      this.#lastSeq = seq;
      this.#counters.syncs++;
      this.#counters.bytesWritten += copy.length;
      return seq;
    });
    this.#tail = durable;
    return durable;
  }

  async *records(fromSeq = 1): AsyncIterable<LogRecord> {
    for (const record of this.#table.records) if (record.seq >= fromSeq) yield record;
  }

  get lastSeq(): number {
    return this.#lastSeq;
  }

  get firstSeq(): number {
    return this.#table.records[0]?.seq ?? this.#lastSeq + 1;
  }

  get poisoned(): FermataError | undefined {
    return this.#poison;
  }

  get counters(): LogCounters {
    return this.#counters;
  }

  get bytesToReplay(): number {
    return this.#table.records.reduce((bytes, record) => bytes + record.body.length, 0);
  }

  async truncateCovered(coveredSeq: number): Promise<number> {
    const before = this.#table.records.length;
    this.#table.records = this.#table.records.filter((record) => record.seq > coveredSeq);
    this.#table.truncations.push(coveredSeq);
    return before - this.#table.records.length;
  }

  async cutToSynced(): Promise<void> {
    await this.#tail.catch(() => undefined);
  }

  describe(): Readonly<Record<string, string | number>> {
    return { log: 'memory' };
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#tail.catch(() => undefined);
  }
}

/** Opens a MemoryLog over `table` and replays what it holds past the checkpoint, as the contract asks. */
function memoryLog(table: MemoryLogTable): LogOpener {
  return async ({ coveredSeq, replay, onPoisoned }) => {
    const shown = table.records.filter((record) => record.seq > coveredSeq);
    replay.expectBytes(shown.reduce((bytes, record) => bytes + record.body.length, 0));
    for (const record of shown) await replay.record(record.seq, record.type, record.body, record.body.length);
    return new MemoryLog(table, onPoisoned);
  };
}

durableLogContract({
  name: 'in-memory log',
  async newLog() {
    const table = new MemoryLogTable();
    return {
      opener: memoryLog(table),
      recordTypes: async () => table.records.map((record) => record.type),
      truncatedThrough: async () => Math.max(0, ...table.truncations),
      fence: async () => {
        table.fenced = true;
      },
    };
  },
});
