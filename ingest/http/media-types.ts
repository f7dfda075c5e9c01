// The media types the timer routes take and answer with, and how a Content-Type header is
// read. Shared by /v1/timers, /v1/timers/stream and the OpenAPI document, so that the three
// cannot name a type differently. Pure functions; any thread.

export const mediaTypes = {
  json: 'application/json',
  ndjson: 'application/x-ndjson',
  arrowStream: 'application/vnd.apache.arrow.stream',
} as const;

/** `type/subtype` of a Content-Type header, lowercased, without parameters. */
export function mediaTypeOf(contentType: string | undefined): string | undefined {
  if (contentType === undefined) return undefined;
  const cut = contentType.indexOf(';');
  return (cut < 0 ? contentType : contentType.slice(0, cut)).trim().toLowerCase();
}
