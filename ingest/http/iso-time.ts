// Epoch ms → RFC 3339 UTC text as Date.prototype.toISOString writes it ("2026-12-05T04:02:05.123Z"),
// for answers that name a fire time. Every add answers with one, and fire times spread over
// days are each different: a Date and its formatting cost 4% of the server's main thread at
// 125,000 single adds a second. Here the day's "YYYY-MM-DDT" comes from a small cache (adds
// fall on few days) and the time of day is put together from tables of padded digits.
const msPerDay = 86_400_000;
/** Years 0000–9999 are written with four digits; outside them (never a fire time) Date writes the text. */
const firstMs = -62_167_219_200_000;
const endMs = 253_402_300_800_000;
/** Day prefixes kept at most; the cache starts over when full. */
const daysCachedMax = 4096;

const twoDigits = Array.from({ length: 100 }, (_, n) => String(n).padStart(2, '0'));
const threeDigits = Array.from({ length: 1000 }, (_, n) => String(n).padStart(3, '0'));
const dayPrefixes = new Map<number, string>();

function dayPrefix(day: number): string {
  let prefix = dayPrefixes.get(day);
  if (prefix === undefined) {
    if (dayPrefixes.size >= daysCachedMax) dayPrefixes.clear();
    prefix = new Date(day * msPerDay).toISOString().slice(0, 11);
    dayPrefixes.set(day, prefix);
  }
  return prefix;
}

/** `new Date(ms).toISOString()` for a whole number of epoch ms, without a Date for the common years. */
export function isoOf(ms: number): string {
  if (!(Number.isInteger(ms) && ms >= firstMs && ms < endMs)) return new Date(ms).toISOString();
  const day = Math.floor(ms / msPerDay);
  let rest = ms - day * msPerDay;
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = Math.floor(rest / 1000);
  rest -= seconds * 1000;
  return `${dayPrefix(day)}${twoDigits[hours]}:${twoDigits[minutes]}:${twoDigits[seconds]}.${threeDigits[rest]}Z`;
}
