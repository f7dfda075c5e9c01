// How many PostgreSQL log transactions a node runs at once, over all its partitions' logs
// (pg-log.ts): a transaction takes a slot before it starts and gives it back when it ends. Main
// thread, like the logs that share it (one gate per node, cluster/node.ts).
//
// Why: a log fixes a transaction's group of records when it starts it, and each partition's log
// may start several at once (pgLogLimits.transactionsInFlightMax). With many partitions a node
// started far more transactions than its pool has connections; the surplus waited in the
// client's queue for a connection with the small groups they had when they started (a turn's
// keyed adds cut over every partition: a few timers each). Held back by the gate instead, the
// records wait in their log's queue, where the records that come meanwhile join them, and a
// transaction starts with every record its partition gathered by then, on a connection that is
// free. The gate leaves room in the pool for the node's other statements (lease renewals,
// checkpoint files), which therefore never queue behind the logs.
export class TransactionGate {
  readonly #capacity: number;
  #taken = 0;
  /** Logs that wanted a slot when none was free, in the order they asked: woken (their pump called) as slots come back. */
  #waiting: (() => void)[] = [];

  constructor(capacity: number) {
    if (!(Number.isInteger(capacity) && capacity >= 1)) throw new RangeError(`a transaction gate needs a capacity of at least 1, not ${capacity}`);
    this.#capacity = capacity;
  }

  /** Takes a slot; when none is free, `wake` is called once one is (then ask again) and this returns false. */
  tryTake(wake: () => void): boolean {
    if (this.#taken < this.#capacity) {
      this.#taken++;
      return true;
    }
    if (!this.#waiting.includes(wake)) this.#waiting.push(wake);
    return false;
  }

  /** Gives a slot back, and wakes the waiting logs in turn while slots are free (a woken log with nothing left to write takes none). */
  release(): void {
    this.#taken--;
    while (this.#taken < this.#capacity && this.#waiting.length > 0) (this.#waiting.shift() as () => void)();
  }

  /** Slots taken now (for tests and stats). */
  get taken(): number {
    return this.#taken;
  }
}
