// The hints for JSON that does not parse (ingest/http/body/json-hints.ts): NDJSON sent as
// application/json, and NDJSON whose newlines were stripped (`curl -d @file`), told apart from
// plain broken JSON, with brackets and quotes inside strings not mistaken for structure.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jsonBodyProblem, ndjsonLineProblem, runTogether } from '../../ingest/http/body/json-hints.ts';

const timer = (n: number): string => JSON.stringify({ delay_ms: n, target: 'https://a.example/', payload: `}{"x":"[${n}]\\"` });

test('objects back to back on one line are seen, strings holding brackets and quotes too; anything else is not', () => {
  assert.equal(runTogether(timer(1) + timer(2)), true);
  assert.equal(runTogether(`${timer(1)} \t${timer(2)}${timer(3)}`), true);
  for (const other of [timer(1), `${timer(1)},${timer(2)}`, `${timer(1)}]`, '{"a":', '"text"{"a":1}', '']) {
    assert.equal(runTogether(other), false, other);
  }
});

test('an application/json body: the NDJSON hint for lines, the --data-binary hint for stripped newlines, none for plain broken JSON', () => {
  const lines = jsonBodyProblem(`${timer(1)}\n${timer(2)}\n`);
  assert.match(lines, /^the body is not valid JSON \(.+\): it looks like NDJSON, one JSON value a line; .*Content-Type: application\/x-ndjson$/);
  const stripped = jsonBodyProblem(timer(1) + timer(2));
  assert.match(stripped, /curl -d @file.*--data-binary @file.*application\/x-ndjson/);
  const broken = jsonBodyProblem('{"delay_ms": 5,\n"target": }');
  assert.match(broken, /^the body is not valid JSON \([^)]+\)$/);
  // Its first line alone is not JSON: a pretty-printed object with an error further on is no NDJSON.
  assert.doesNotMatch(jsonBodyProblem('{\n"delay_ms": 5,,\n}\n'), /NDJSON/);
});

test('an NDJSON line that is not JSON says why, and adds the --data-binary hint only for objects run together', () => {
  const line = timer(1) + timer(2);
  let parseError: unknown;
  try {
    JSON.parse(line);
  } catch (err) {
    parseError = err;
  }
  assert.match(ndjsonLineProblem(line, parseError), /^not valid JSON \(.+\): JSON objects follow each other on one line.*--data-binary @file/);
  assert.equal(ndjsonLineProblem('{"a":', new SyntaxError('cut short')), 'not valid JSON (cut short)');
});
