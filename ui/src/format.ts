// How the page writes numbers and times: thousands separators and units in the browser's own
// locale, times in the browser's time zone (the UTC form goes in the element's title, shown on
// hover).

const integer = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });
const dateTime = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short' });

export function count(value: number): string {
  return integer.format(value);
}

export function perSecond(value: number): string {
  return `${decimal.format(value)}/s`;
}

export function ms(value: number): string {
  if (value < 10_000) return `${integer.format(value)} ms`;
  return `${decimal.format(value / 1000)} s`;
}

const durationUnits = [
  [86_400_000, 'd'],
  [3_600_000, 'h'],
  [60_000, 'min'],
] as const;

/** A span such as a retention: in days, hours or minutes from a minute up, else as ms(). */
export function duration(value: number): string {
  for (const [unitMs, unit] of durationUnits) if (value >= unitMs) return `${decimal.format(value / unitMs)} ${unit}`;
  return ms(value);
}

const byteUnits = ['B', 'KiB', 'MiB', 'GiB', 'TiB'] as const;

export function bytes(value: number): string {
  let unit = 0;
  let scaled = value;
  while (scaled >= 1024 && unit < byteUnits.length - 1) {
    scaled /= 1024;
    unit++;
  }
  return `${unit === 0 ? integer.format(scaled) : decimal.format(scaled)} ${byteUnits[unit]}`;
}

export function percent(part: number, whole: number): string {
  return whole <= 0 ? '–' : `${decimal.format((100 * part) / whole)} %`;
}

/** A time in the browser's zone; `utc` is its ISO form in UTC, for the title. */
export function localTime(value: string | number): { text: string; utc: string } {
  const date = new Date(value);
  return { text: dateTime.format(date), utc: date.toISOString().replace('.000Z', 'Z') + ' (UTC)' };
}
