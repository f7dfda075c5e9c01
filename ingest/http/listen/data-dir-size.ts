// How many bytes the data directory's files take, for GET /v1/stats (and the dashboard's
// overview beside the free space). Measured by walking the directory (its log segments, spill
// runs, manifest: tens to hundreds of files), at most once every `measureIntervalMs`, in the
// background: an answer reads the last figure and never waits for a walk. Main thread.
import type { Dirent } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

export interface DataDirSizeOptions {
  readonly dir: string;
  readonly measureIntervalMs: number;
}

export class DataDirSize {
  readonly #dir: string;
  readonly #intervalMs: number;
  #bytes: number | undefined;
  #measuredAtMs = -Infinity;
  #measuring: Promise<void> | undefined;

  constructor(options: DataDirSizeOptions) {
    this.#dir = options.dir;
    this.#intervalMs = options.measureIntervalMs;
  }

  /** The last figure (undefined before the first walk ends, or when the directory cannot be read); starts a walk when it is old. */
  bytes(): number | undefined {
    if (this.#measuring === undefined && performance.now() - this.#measuredAtMs >= this.#intervalMs) {
      this.#measuring = this.measure().finally(() => (this.#measuring = undefined));
    }
    return this.#bytes;
  }

  /** Walks the directory now; resolves once the figure is in. */
  async measure(): Promise<void> {
    this.#measuredAtMs = performance.now();
    let entries: Dirent[];
    try {
      entries = await readdir(this.#dir, { recursive: true, withFileTypes: true });
    } catch {
      this.#bytes = undefined;
      return;
    }
    let total = 0;
    for (const entry of entries) {
      if (!entry.isFile()) continue;
      // A file deleted since the listing (a checkpoint removed a segment) counts for nothing.
      total += await stat(join(entry.parentPath, entry.name)).then(
        (file) => file.size,
        () => 0,
      );
    }
    this.#bytes = total;
  }
}
