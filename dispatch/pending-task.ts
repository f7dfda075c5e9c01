// A delivery task on the main thread, from its first timer to its recorded outcomes: the task
// being built for a worker (DeliveryTaskBuilder), and beside it, in columns of this thread's
// own, which timers it holds (their ADD sequence, row, attempt, fire time and queue), which the
// worker never sees. The dispatcher fills it, sends it and frees its room once it is done; the
// outcome recorder reads it when the worker answers. Main thread only.
//
//   PendingTask  builder   DeliveryTaskBuilder   what goes to the worker (task-builder.ts)
//                seqs      Float64Array          ┐
//                rows      Uint32Array           │ timer `at` of the task, by its position
//                attempts  Uint32Array           │ in the builder
//                fireAtMs  Float64Array          │ (the id's: the time it was added with)
//                dueAtMs   Float64Array          │ (when it fell due: what lateness is from)
//                queues    Uint16Array           ┘
//                claims    Int32Array            single deliveries, once sent: shared with the worker
import type { DueSlice } from '../engine/engine.ts';
import { DeliveryTaskBuilder, type TaskBuffers, type TaskTimer } from './task-builder.ts';

export class PendingTask {
  readonly builder: DeliveryTaskBuilder;
  readonly seqs: Float64Array;
  readonly rows: Uint32Array;
  readonly attempts: Uint32Array;
  readonly fireAtMs: Float64Array;
  /** When each fell due: its fire time, or the one a PATCH gave it (engine/reschedule.ts), or a retry's. */
  readonly dueAtMs: Float64Array;
  readonly queues: Uint16Array;
  /** A task of single deliveries: its claims, shared with its worker once it is sent (DeliveryTask.claims). */
  claims: Int32Array | undefined;

  constructor(capacity: number, sink: string | undefined, payloadBytesInitial: number, buffers: TaskBuffers) {
    this.builder = new DeliveryTaskBuilder(capacity, sink, payloadBytesInitial, buffers);
    this.seqs = new Float64Array(buffers.take(capacity * Float64Array.BYTES_PER_ELEMENT), 0, capacity);
    this.rows = new Uint32Array(buffers.take(capacity * Uint32Array.BYTES_PER_ELEMENT), 0, capacity);
    this.attempts = new Uint32Array(buffers.take(capacity * Uint32Array.BYTES_PER_ELEMENT), 0, capacity);
    this.fireAtMs = new Float64Array(buffers.take(capacity * Float64Array.BYTES_PER_ELEMENT), 0, capacity);
    this.dueAtMs = new Float64Array(buffers.take(capacity * Float64Array.BYTES_PER_ELEMENT), 0, capacity);
    this.queues = new Uint16Array(buffers.take(capacity * Uint16Array.BYTES_PER_ELEMENT), 0, capacity);
  }

  get count(): number {
    return this.builder.count;
  }

  get capacity(): number {
    return this.seqs.length;
  }

  /** This thread's arrays, for `buffers` to keep once the task's outcomes are recorded. */
  release(buffers: TaskBuffers): void {
    for (const column of [this.seqs, this.rows, this.attempts, this.fireAtMs, this.dueAtMs, this.queues]) buffers.give(column.buffer as ArrayBuffer);
  }

  add(slice: DueSlice, i: number, timer: TaskTimer): void {
    const at = this.builder.count;
    this.builder.add(timer);
    this.seqs[at] = slice.seqs[i] as number;
    this.rows[at] = slice.rows[i] as number;
    this.attempts[at] = slice.attempts[i] as number;
    this.fireAtMs[at] = slice.fireAtMs[i] as number;
    this.dueAtMs[at] = slice.dueAtMs[i] as number;
    this.queues[at] = slice.queues[i] as number;
  }
}
