// Buffers whose pages are already mapped, made ahead on a helper thread. Owned by the main thread.
//
// The first write to each page of fresh memory is a page fault, and the kernel zeroes the page
// before mapping it. On the VMs fermata is measured on that costs 0.1 ms a MiB at best and
// 1.2–1.9 ms a MiB at worst (the host maps the guest's memory lazily too), and which one a run
// gets varies from run to run: a replay of 1,000,000 timers took 0.63–1.4 s with the same code,
// the difference all in the kernel's clear_page, and a store filling with single admits spent
// a quarter of its main thread's time there. The arena fills 4 MiB slabs one after another; a
// helper thread (prefault-worker.ts, one per process, shared by every supply) allocates the
// next one and touches its pages while the current one fills, and transfers it over: the
// faults are taken on the other core.
//
//   engine thread                          helper thread
//   request() ── { bytes } ─── port ──────▶ allocate, write a byte in every page
//   take() ◀── receiveMessageOnPort ◀───── transfer the ArrayBuffer (no copy)
//
// take() polls the port synchronously, so a buffer can be picked up in the middle of a long
// synchronous stretch (a replay) without waiting for the event loop. A buffer not there yet
// is simply not taken: the caller allocates one itself, as it would without a supply.
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from 'node:worker_threads';
import type { PrefaultRequest } from './prefault-worker.ts';

let helper: Worker | undefined;

/** The process's helper thread, started on first use; it never keeps the process alive. */
function helperThread(): Worker {
  if (helper === undefined) {
    // No flags of the parent's: it needs none, and some (--input-type with --eval) would stop it loading.
    const worker = new Worker(new URL('./prefault-worker.ts', import.meta.url), { execArgv: [] });
    worker.unref();
    // A helper that fails is dropped: supplies made afterwards start a new one, and supplies
    // still bound to it only stop receiving (their owners allocate for themselves).
    worker.on('error', () => {
      if (helper === worker) helper = undefined;
    });
    worker.on('exit', () => {
      if (helper === worker) helper = undefined;
    });
    helper = worker;
  }
  return helper;
}

export class PrefaultedBuffers {
  /** Bytes of every buffer this supply makes. */
  readonly bytes: number;
  readonly #port: MessagePort;
  /** Requested and not yet taken (on their way, or waiting in the port). */
  #outstanding = 0;
  #closed = false;
  /** Buffers take() handed out. */
  taken = 0;

  constructor(bytes: number) {
    this.bytes = bytes;
    const { port1, port2 } = new MessageChannel();
    this.#port = port1;
    // Polled with receiveMessageOnPort, never listened to: the port must not hold the loop open.
    this.#port.unref();
    helperThread().postMessage(port2, [port2]);
  }

  /** Buffers requested and not yet taken. */
  get outstanding(): number {
    return this.#outstanding;
  }

  /** Asks the helper for one more buffer. */
  request(): void {
    if (this.#closed) return;
    const request: PrefaultRequest = { bytes: this.bytes };
    this.#port.postMessage(request);
    this.#outstanding++;
  }

  /** A prefaulted buffer of `bytes` if one has arrived, else undefined; never waits. */
  take(): ArrayBuffer | undefined {
    if (this.#closed || this.#outstanding === 0) return undefined;
    const received = receiveMessageOnPort(this.#port);
    if (received === undefined) return undefined;
    this.#outstanding--;
    this.taken++;
    return received.message as ArrayBuffer;
  }

  /** Stops taking and requesting; buffers still on their way are dropped with the port. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#port.close();
  }
}
