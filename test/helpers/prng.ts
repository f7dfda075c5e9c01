// A small seeded PRNG (mulberry32) for tests and the simulated file system: every random
// choice reproducible from its seed.
export class Prng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  uint32(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** An integer in [0, n). */
  below(n: number): number {
    return Math.floor((this.uint32() / 2 ** 32) * n);
  }

  coin(): boolean {
    return this.uint32() >= 2 ** 31;
  }

  bytes(length: number): Uint8Array {
    const out = new Uint8Array(length);
    for (let i = 0; i < length; i++) out[i] = this.below(256);
    return out;
  }

  shuffle<T>(items: T[]): void {
    for (let index = items.length - 1; index > 0; index--) {
      const other = this.below(index + 1);
      const item = items[index] as T;
      items[index] = items[other] as T;
      items[other] = item;
    }
  }
}
