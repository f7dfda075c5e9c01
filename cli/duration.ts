// Durations on the command line, in config files and the environment: a number and a unit.

const durationUnitsMs: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "1500ms", "2s", "1.5h", "30d" → ms; undefined when it is not one. */
export function parseDurationMs(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text.trim());
  if (match === null) return undefined;
  const ms = Number(match[1]) * (durationUnitsMs[match[2] as string] as number);
  return Number.isSafeInteger(Math.round(ms)) ? Math.round(ms) : undefined;
}
