// The resident timers' targets, interned: a timer keeps a u32 index (the store's targetIndex
// column) instead of its own copy of the URL, and the many timers of one target share it.
// Owned by the main thread, inside the resident store (resident-store.ts), which pins and
// releases through it.
//
//   names    [ "https://a/…" | undefined | "https://b/…" | … ]   index → target (undefined: free)
//   indexOf  Map { "https://a/…" → 0, "https://b/…" → 2 }         target → index
//   refs     [ 3 | 0 | 1 | … ]  u32, timers and pins holding each index; at 0 the index is freed
//   free     [ 1 ]              freed indexes, taken again first
//
// A target is pinned while a batch is being allocated (intern, then its rows add their own
// references, then the pin is released), so that its index stays valid whatever happens to the
// timers using it meanwhile.
import assert from 'node:assert/strict';
import { widened } from './column-growth.ts';

const targetTableInitial = 16;

export class TargetTable {
  readonly #names: Array<string | undefined> = [];
  readonly #indexOf = new Map<string, number>();
  #refs = new Uint32Array(targetTableInitial);
  readonly #free: number[] = [];

  /**
   * Index → target, undefined for an index not interned: the same array for the table's life,
   * so a reader may keep it (delivery reads a target per timer). Changed only through the table.
   */
  get names(): readonly (string | undefined)[] {
    return this.#names;
  }

  /**
   * The refcounts by index, for a caller that adds a reference per row of a batch without a
   * call per row. Replaced by intern() when it grows: read again after one.
   */
  get refs(): Uint32Array {
    return this.#refs;
  }

  /** Distinct targets interned. */
  get size(): number {
    return this.#indexOf.size;
  }

  /** Bytes of the refcount array: what the store's bytesUsed() counts of the table. */
  get bytesUsed(): number {
    return this.#refs.byteLength;
  }

  /** The index of `target`, adding it if new, pinned: it stays valid until unref(index). */
  intern(target: string): number {
    let index = this.#indexOf.get(target);
    if (index === undefined) {
      index = this.#free.pop() ?? this.#names.length;
      if (index >= this.#refs.length) this.#refs = widened(this.#refs, this.#refs.length * 2, (n) => new Uint32Array(n));
      this.#names[index] = target;
      this.#indexOf.set(target, index);
    }
    this.#refs[index] = (this.#refs[index] as number) + 1;
    return index;
  }

  isInterned(index: number): boolean {
    return this.#names[index] !== undefined;
  }

  /** One more timer holds `index` (interned, and pinned by the caller). */
  addRef(index: number): void {
    this.#refs[index] = (this.#refs[index] as number) + 1;
  }

  /** A timer or a pin lets go of `index`; the target is freed once none holds it. */
  unref(index: number): void {
    const refs = (this.#refs[index] as number) - 1;
    assert.ok(refs >= 0, 'target refcount below zero');
    this.#refs[index] = refs;
    if (refs > 0) return;
    this.#indexOf.delete(this.#names[index] as string);
    this.#names[index] = undefined;
    this.#free.push(index);
  }

  /** Timers and pins holding `index` (0 for an index no longer interned). */
  refCount(index: number): number {
    return this.#names[index] === undefined ? 0 : (this.#refs[index] as number);
  }
}
