// Occurrence keys, `schedule:{name}:{occurrence epoch ms}`: the key of every timer a schedule
// creates (engine/schedules/materializer.ts). The prefix is reserved: user keys may not begin
// with it (engine/batch/validate.ts), so a key with it names an occurrence, and an ADD record's
// keys tell replay which occurrences it created. Pure functions, any thread.

/** The prefix of every occurrence's key; user keys may not begin with it (engine/batch/validate.ts). */
export const occurrenceKeyPrefix = 'schedule:';
const prefixBytes = new TextEncoder().encode(occurrenceKeyPrefix);

export const occurrenceKey = (name: string, occurrenceMs: number): string => `${occurrenceKeyPrefix}${name}:${occurrenceMs}`;

/** Whether bytes [from, to) of `values` begin with the reserved prefix. */
export function isOccurrenceKey(values: Uint8Array, from: number, to: number): boolean {
  if (to - from < prefixBytes.length) return false;
  for (let i = 0; i < prefixBytes.length; i++) if (values[from + i] !== prefixBytes[i]) return false;
  return true;
}

/** (name, occurrence) of an occurrence key, or undefined when it is not one. */
export function parseOccurrenceKey(key: string): { readonly name: string; readonly occurrenceMs: number } | undefined {
  if (!key.startsWith(occurrenceKeyPrefix)) return undefined;
  const cut = key.lastIndexOf(':');
  const occurrenceMs = Number(key.slice(cut + 1));
  if (cut < occurrenceKeyPrefix.length || !Number.isSafeInteger(occurrenceMs)) return undefined;
  return { name: key.slice(occurrenceKeyPrefix.length, cut), occurrenceMs };
}
