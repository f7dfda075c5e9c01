// Typed arrays reused from one call to the next, for work that is synchronous from start to end
// and keeps nothing of them afterwards: the engine's insert of a batch, and replay's key plans.
// Owned by the main thread (one per engine).
//
// A replay of 1,000,000 keyed timers planned and inserted 100 batches, each with about 500 KB
// of fresh typed arrays (a Float64Array of original sequences, the rows' key hashes, a probe
// table for keys first seen in the batch, the slots taken, …): 50 MB of memory that V8 frees
// only when it next collects, and that the kernel maps page by page when it is first written,
// at up to 1.9 ms a MiB on the VMs fermata is measured on. Each name here keeps one buffer,
// grown by doubling, and hands out a view of the length asked for. Its contents are whatever
// the previous user left: every user fills what it reads.
import assert from 'node:assert/strict';

type ArrayKind = Float64ArrayConstructor | Int32ArrayConstructor | Uint32ArrayConstructor | Uint8ArrayConstructor;

export class ScratchArrays {
  readonly #arrays = new Map<string, Float64Array | Int32Array | Uint32Array | Uint8Array>();

  float64(name: string, length: number): Float64Array {
    return this.#view(name, length, Float64Array);
  }

  int32(name: string, length: number): Int32Array {
    return this.#view(name, length, Int32Array);
  }

  uint32(name: string, length: number): Uint32Array {
    return this.#view(name, length, Uint32Array);
  }

  uint8(name: string, length: number): Uint8Array {
    return this.#view(name, length, Uint8Array);
  }

  #view<K extends ArrayKind>(name: string, length: number, kind: K): InstanceType<K> {
    let array = this.#arrays.get(name);
    if (array === undefined || array.length < length) {
      let capacity = 1024;
      while (capacity < length) capacity *= 2;
      array = new kind(capacity);
      this.#arrays.set(name, array);
    }
    assert.ok(array instanceof kind, `scratch array ${name} asked for as two kinds`);
    return array.subarray(0, length) as InstanceType<K>;
  }
}
