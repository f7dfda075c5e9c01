// What to tell a client whose JSON did not parse, when the text shows how it went wrong. Two
// mistakes are common enough to name: an NDJSON batch sent as application/json (its first line
// parses alone), and an NDJSON file whose newlines were stripped on the way (`curl -d @file`
// drops them: JSON objects back to back on one line). Used only after JSON.parse failed, never
// on the path of a body that parses. Pure functions; main thread.
import { mediaTypes } from '../media-types.ts';

/** Why JSON.parse refused `text`, in its own words. */
function parseFailure(text: string): string | undefined {
  try {
    JSON.parse(text);
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

const parses = (text: string): boolean => parseFailure(text) === undefined;

/**
 * The end (exclusive) of the JSON object or array that opens `text` (after white space), found
 * by its brackets outside strings; -1 when `text` does not open with one or it never closes.
 */
function firstValueEnd(text: string): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '{' || c === '[') depth++;
    else if (depth === 0) {
      if (c !== ' ' && c !== '\t' && c !== '\r' && c !== '\n') return -1;
    } else if (c === '"') inString = true;
    else if (c === '}' || c === ']') {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

/** One line holds a JSON object and, straight after it on the same line, another one: newlines stripped. */
export function runTogether(line: string): boolean {
  const end = firstValueEnd(line);
  return end > 0 && parses(line.slice(0, end)) && line.slice(end).trimStart().startsWith('{');
}

/** Several lines, the first of them a JSON value on its own: NDJSON. */
function ndjsonLines(text: string): boolean {
  const cut = text.indexOf('\n');
  return cut >= 0 && text.slice(cut + 1).trim() !== '' && parses(text.slice(0, cut));
}

const dataBinaryHint =
  'JSON objects follow each other on one line, as when `curl -d @file` strips the newlines of an NDJSON file: send the file with `curl --data-binary @file`, which keeps them';

/** The message for an NDJSON line (or stream line) that is not valid JSON. */
export function ndjsonLineProblem(line: string, err: unknown): string {
  const reason = err instanceof Error ? err.message : String(err);
  return `not valid JSON (${reason})${runTogether(line) ? `: ${dataBinaryHint}` : ''}`;
}

/** The message for an application/json body that is not valid JSON, with a hint when the text shows the mistake. */
export function jsonBodyProblem(text: string): string {
  const reason = parseFailure(text) ?? 'it holds a key fermata refuses (__proto__, constructor.prototype)';
  const problem = `the body is not valid JSON (${reason})`;
  const ndjson = `to add several timers, send one a line to POST /v1/timers as Content-Type: ${mediaTypes.ndjson}`;
  if (ndjsonLines(text)) return `${problem}: it looks like NDJSON, one JSON value a line; ${ndjson}`;
  if (runTogether(text)) return `${problem}: ${dataBinaryHint}; ${ndjson}`;
  return problem;
}
