// The page's live counters: GET /v1/events read with fetch() (so that it carries the
// Authorization header, which EventSource cannot), each `counters` event's stats handed to
// `onStats`; where the stream is not served or breaks, GET /v1/stats once a second instead,
// trying the stream again every `streamRetryMs`. `onState` hears which of the two is running (or that neither
// answers) so the page can show it. One Live per page; browser main thread.
import { api, authHeaders, failIfError } from './api.ts';
import type { Stats } from './types.ts';

export type Connection = 'connecting' | 'streaming' | 'polling' | 'offline';

const pollMs = 1_000;
const streamRetryMs = 15_000;

export class Live {
  readonly #onStats: (stats: Stats) => void;
  readonly #onState: (state: Connection) => void;
  #stopped = false;
  #abort = new AbortController();

  constructor(onStats: (stats: Stats) => void, onState: (state: Connection) => void) {
    this.#onStats = onStats;
    this.#onState = onState;
  }

  start(): void {
    this.#onState('connecting');
    // The first numbers from a plain GET, not after the stream's answer: the page shows them a round trip sooner.
    void api<Stats>('GET', '/v1/stats').then(
      (stats) => this.#stopped || this.#onStats(stats),
      () => undefined,
    );
    void this.#run();
  }

  /** Ends the stream and the polling (a new token: the page starts a new Live). */
  stop(): void {
    this.#stopped = true;
    this.#abort.abort();
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      const streamed = await this.#stream();
      if (this.#stopped) return;
      // Not served, refused or broken: poll until it is time to try the stream again.
      const retryAt = Date.now() + (streamed ? 0 : streamRetryMs);
      do {
        await this.#poll();
        await delay(pollMs, this.#abort.signal);
      } while (!this.#stopped && Date.now() < retryAt);
    }
  }

  async #poll(): Promise<void> {
    try {
      this.#onStats(await api<Stats>('GET', '/v1/stats'));
      this.#onState('polling');
    } catch {
      if (!this.#stopped) this.#onState('offline');
    }
  }

  /** Reads the event stream until it ends; true when it delivered counters (then it is tried again at once). */
  async #stream(): Promise<boolean> {
    let delivered = false;
    await readEvents('/v1/events', this.#abort.signal, (name, data) => {
      if (name !== 'counters') return;
      delivered = true;
      this.#onStats((JSON.parse(data) as { stats: Stats }).stats);
      this.#onState('streaming');
    });
    return delivered;
  }
}

/**
 * Reads a server-sent event stream at `path` with fetch() (the Authorization header goes with
 * it), handing each event's name and data to `onEvent`, until it ends, breaks or `signal` aborts;
 * false when it could not be opened (not served, refused, not an event stream).
 */
export async function readEvents(path: string, signal: AbortSignal, onEvent: (name: string, data: string) => void): Promise<boolean> {
  try {
    const response = await failIfError(await fetch(path, { headers: { ...authHeaders(), accept: 'text/event-stream' }, signal, cache: 'no-store' }));
    if (response.body === null || !(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) return false;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return true;
      buffer += value;
      let end: number;
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        const event = parseEvent(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (event.data !== '') onEvent(event.name, event.data);
      }
    }
  } catch {
    return false;
  }
}

/** One server-sent event's name (`message` when it has none) and data lines joined. */
export function parseEvent(block: string): { name: string; data: string } {
  let name = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith('event:')) name = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
  }
  return { name, data: data.join('\n') };
}

function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
