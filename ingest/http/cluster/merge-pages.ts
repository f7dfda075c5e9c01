// The k-way merge of the partitions' pages in cluster mode's fan-out lists (fan-out.ts): each
// partition's page already in that partition's order, the merged page the first `limit` items in
// the order `before` gives, and how many each partition gave, so that its next cursor can be
// written. Pure; main thread.

export interface MergedPage<T> {
  readonly items: T[];
  /** Items taken from each partition's page, a prefix of it. */
  readonly taken: Map<number, number>;
}

/** The first `limit` items of `pages` (partition → its page) in `before` order, taking each page's items in its own order. */
export function mergePages<T>(pages: ReadonlyMap<number, readonly T[]>, limit: number, before: (a: T, b: T) => boolean): MergedPage<T> {
  const taken = new Map<number, number>();
  for (const partition of pages.keys()) taken.set(partition, 0);
  const items: T[] = [];
  while (items.length < limit) {
    let best: number | undefined;
    let bestItem: T | undefined;
    for (const [partition, page] of pages) {
      const at = taken.get(partition) as number;
      if (at >= page.length) continue;
      const item = page[at] as T;
      if (bestItem === undefined || before(item, bestItem)) {
        best = partition;
        bestItem = item;
      }
    }
    if (best === undefined) break;
    items.push(bestItem as T);
    taken.set(best, (taken.get(best) as number) + 1);
  }
  return { items, taken };
}

/** Whether timer view `a` comes before `b` by `field` (an RFC 3339 time or id, compared as text: they sort as written), then by id. */
export const byFieldThenId =
  (field: string) =>
  (a: Record<string, unknown>, b: Record<string, unknown>): boolean => {
    const fa = String(a[field]);
    const fb = String(b[field]);
    return fa !== fb ? fa < fb : String(a.id) < String(b.id);
  };
