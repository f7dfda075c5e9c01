// Which reader a file gets: by its name's extension, or --format. Each reader's module is
// loaded only when its format is asked for (a CSV import does not load hyparquet).
import { extname } from 'node:path';
import { ImportError } from './import-error.ts';
import { type Source, type SourceFormat, sourceFormats } from './source.ts';

const formatByExtension: Readonly<Record<string, SourceFormat>> = {
  '.arrow': 'arrow',
  '.arrows': 'arrow',
  '.ipc': 'arrow',
  '.feather': 'arrow',
  '.parquet': 'parquet',
  '.csv': 'csv',
  '.ndjson': 'ndjson',
  '.jsonl': 'ndjson',
};

/** The format a file's name says, or `explicit` (--format) when given. */
export function formatOf(path: string, explicit: string | undefined): SourceFormat {
  if (explicit !== undefined) {
    if ((sourceFormats as readonly string[]).includes(explicit)) return explicit as SourceFormat;
    throw new ImportError(`--format must be one of ${sourceFormats.join(', ')}, not "${explicit}"`);
  }
  const format = formatByExtension[extname(path).toLowerCase()];
  if (format === undefined) throw new ImportError(`${path}: cannot tell the format from the name; name it .arrow, .arrows, .parquet, .csv or .ndjson, or give --format`);
  return format;
}

export async function openSource(path: string, format: SourceFormat): Promise<Source> {
  switch (format) {
    case 'arrow':
      return (await import('./read-arrow.ts')).openArrow(path);
    case 'parquet':
      return (await import('./read-parquet.ts')).openParquet(path);
    case 'csv':
      return (await import('./read-csv.ts')).openCsv(path);
    case 'ndjson':
      return (await import('./read-ndjson.ts')).openNdjson(path);
  }
}
