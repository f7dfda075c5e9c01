// The resume point of an import: how many of the file's rows, counted from the first, are all
// acknowledged (durable in fermata). Batches are answered out of order, so the checkpoint keeps
// the rows answered beyond the first gap in memory and moves the count only when the gap fills.
// A --resume starts at the count; rows after it that were acknowledged already are sent again
// and answered as duplicates by their key (a derived key for rows without one), so no row is
// added twice.
//
// The file is JSON beside the imported file (FILE.fermata-import.json, or --checkpoint PATH),
// written whole to a temporary name and renamed over the old one, so a kill leaves the old
// checkpoint or the new one, never half of either. It is not fsync'd: a checkpoint lost to a
// power cut only means more rows sent again as duplicates. It names the file's size and hash
// and the mapping, and a resume with another file or mapping is refused.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { ImportError } from './import-error.ts';

export interface CheckpointState {
  readonly version: 1;
  readonly file: string;
  readonly sizeBytes: number;
  /** The file's hash as derived keys carry it. */
  readonly hash: string;
  /** The mapping as the import took it (flags in a canonical order). */
  readonly mapping: string;
  /** Rows 0 … acknowledged − 1 are all durable. */
  readonly acknowledged: number;
  readonly updatedAt: string;
}

/** SHA-256 of the file's bytes, the first 128 bits in hex: the `{file hash}` of derived keys. */
export async function fileHash(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex').slice(0, 32);
}

export function defaultCheckpointPath(file: string): string {
  return `${file}.fermata-import.json`;
}

export async function readCheckpoint(path: string): Promise<CheckpointState | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  let state: unknown;
  try {
    state = JSON.parse(text);
  } catch {
    throw new ImportError(`${path}: not a checkpoint (not JSON); remove it to start over`);
  }
  const s = state as Partial<CheckpointState>;
  if (s.version !== 1 || typeof s.hash !== 'string' || typeof s.mapping !== 'string' || typeof s.acknowledged !== 'number' || !Number.isSafeInteger(s.acknowledged) || s.acknowledged < 0) {
    throw new ImportError(`${path}: not a checkpoint fermata import wrote; remove it to start over`);
  }
  return s as CheckpointState;
}

/** Where a resume starts: the checkpoint's count, after checking it is this file's and this mapping's. */
export function resumeRow(path: string, state: CheckpointState, hash: string, mapping: string): number {
  if (state.hash !== hash) throw new ImportError(`${path}: the checkpoint is of another file (hash ${state.hash}, this one ${hash}); remove it, or import without --resume`);
  if (state.mapping !== mapping) throw new ImportError(`${path}: the checkpoint was made with another mapping (${state.mapping}); resume with the same --map and --set, or import without --resume`);
  return state.acknowledged;
}

/** Tracks acknowledged rows and writes the checkpoint when asked, at most one write at a time. */
export class Checkpoint {
  readonly #path: string;
  readonly #base: Omit<CheckpointState, 'acknowledged' | 'updatedAt'>;
  #acknowledged: number;
  /** Batches answered beyond the first gap: first row → rows. */
  readonly #ahead = new Map<number, number>();
  #written: number;
  #writing: Promise<void> = Promise.resolve();

  constructor(path: string, base: Omit<CheckpointState, 'acknowledged' | 'updatedAt' | 'version'>, startRow: number) {
    this.#path = path;
    this.#base = { version: 1, ...base };
    this.#acknowledged = startRow;
    this.#written = -1;
  }

  /** Rows 0 … this − 1 are all durable. */
  get acknowledged(): number {
    return this.#acknowledged;
  }

  acknowledge(firstRow: number, rows: number): void {
    this.#ahead.set(firstRow, rows);
    for (let next = this.#ahead.get(this.#acknowledged); next !== undefined; next = this.#ahead.get(this.#acknowledged)) {
      this.#ahead.delete(this.#acknowledged);
      this.#acknowledged += next;
    }
  }

  /** Writes the count if it moved since the last write; writes queue behind each other. */
  save(): Promise<void> {
    this.#writing = this.#writing.then(async () => {
      const acknowledged = this.#acknowledged;
      if (acknowledged === this.#written) return;
      const state: CheckpointState = { ...this.#base, acknowledged, updatedAt: new Date().toISOString() };
      const temporary = `${this.#path}.${process.pid}.tmp`;
      await writeFile(temporary, `${JSON.stringify(state, null, 2)}\n`);
      await rename(temporary, this.#path);
      this.#written = acknowledged;
    });
    return this.#writing;
  }
}
