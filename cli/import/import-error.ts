// The import's one error class: a condition the person running `fermata import` can fix (a bad
// value, a missing column, a file that changed under a checkpoint), said in words that name the
// file, the row (0-based among the data rows, as the API counts), the column and the value.
// Bugs stay plain Errors and are printed with their stack.

export interface RowPlace {
  readonly file: string;
  readonly row: number;
  readonly column?: string;
  readonly value?: unknown;
}

export class ImportError extends Error {
  readonly place: RowPlace | undefined;

  constructor(message: string, place?: RowPlace) {
    super(place === undefined ? message : `${describePlace(place)}: ${message}`);
    this.name = 'ImportError';
    this.place = place;
  }
}

/** `data.csv row 17, column "due", value "tomorrow"`: values cut to 80 characters. */
export function describePlace(place: RowPlace): string {
  let text = `${place.file} row ${place.row}`;
  if (place.column !== undefined) text += `, column "${place.column}"`;
  if ('value' in place) text += `, value ${showValue(place.value)}`;
  return text;
}

function showValue(value: unknown): string {
  let text: string;
  if (value instanceof Uint8Array) text = `<${value.length} bytes>`;
  else if (value instanceof Date) text = value.toISOString();
  else if (typeof value === 'bigint') text = `${value}`;
  else text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
