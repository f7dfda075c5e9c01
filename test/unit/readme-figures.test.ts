// README.md's figures table against bench/baseline.json: the table is regenerated in memory and
// must equal what README.md holds between its markers; the baseline's shape is checked by the
// same parser the generator uses, and that parser and bench/baseline.schema.json must agree.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { baselineText, figureFields, measuredFields, parseBaseline, readBaseline } from '../../scripts/baseline-file.ts';
import { beginMarker, endMarker, figuresTable, formatNumber, withFigures } from '../../scripts/figures-table.ts';

const root = join(import.meta.dirname, '..', '..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const baselineJson: unknown = JSON.parse(readFileSync(join(root, 'bench', 'baseline.json'), 'utf8'));

test('README.md holds the figures table generated from bench/baseline.json (npm run figures)', () => {
  const table = figuresTable(readBaseline(root));
  assert.equal(withFigures(readme, table), readme, 'run `npm run figures` and commit README.md');
  assert.equal(readme.split(beginMarker).length, 2, 'one begin marker');
  assert.equal(readme.split(endMarker).length, 2, 'one end marker');
});

test('every baseline figure is a key some bench prints', () => {
  const sources: string[] = [];
  const visit = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory() && entry.name !== 'results') visit(join(dir, entry.name));
      else if (entry.name.endsWith('.ts')) sources.push(readFileSync(join(dir, entry.name), 'utf8'));
    }
  };
  visit(join(root, 'bench'));
  for (const figure of parseBaseline(baselineJson).figures) {
    assert.ok(sources.some((text) => text.includes(`'${figure.name}'`)), `${figure.name} is printed by no bench/ file`);
  }
});

test('bench/baseline.json is written as the writer writes it (field order, number form)', () => {
  assert.equal(baselineText(parseBaseline(baselineJson)), readFileSync(join(root, 'bench', 'baseline.json'), 'utf8'));
});

test('the parser and bench/baseline.schema.json ask for the same fields', () => {
  type ObjectSchema = { required: string[]; properties: Record<string, unknown> };
  const schema = JSON.parse(readFileSync(join(root, 'bench', 'baseline.schema.json'), 'utf8')) as { $defs: { figure: ObjectSchema; measured: ObjectSchema } };
  assert.deepEqual(schema.$defs.figure.required, [...figureFields]);
  assert.deepEqual(Object.keys(schema.$defs.figure.properties), [...figureFields]);
  assert.deepEqual(schema.$defs.measured.required, [...measuredFields]);
  assert.deepEqual(Object.keys(schema.$defs.measured.properties), [...measuredFields]);
});

test('a baseline of the wrong shape is refused with the field named', () => {
  const good = parseBaseline(baselineJson);
  const first = good.figures.find((figure) => figure.measured !== null);
  assert.ok(first?.measured != null);
  const measured = first.measured;
  const withFigure = (change: Record<string, unknown>): unknown => ({ ...good, figures: [{ ...first, ...change }] });
  const withMeasured = (change: Record<string, unknown>): unknown => withFigure({ measured: { ...measured, ...change } });
  const refusals: ReadonlyArray<[unknown, RegExp]> = [
    [withMeasured({ median: measured.max + 1 }), /min ≤ median ≤ max/],
    [withMeasured({ runs: 0 }), /"runs"/],
    [withMeasured({ runs: 1, min: 1, median: 1, max: 2 }), /one run/],
    [withMeasured({ date: '5 Dec 2026' }), /"date"/],
    [withMeasured({ commit: 'HEAD' }), /"commit"/],
    [withMeasured({ machine: 'laptop' }), /machine "laptop"/],
    [withMeasured({ source: '' }), /"source"/],
    [withMeasured({ extra: 1 }), /unknown field "extra"/],
    [withFigure({ measured: 5 }), /"measured"/],
    [withFigure({ unit: 'timers' }), /unit "timers"/],
    [withFigure({ better: 'up' }), /"better"/],
    [withFigure({ target: '300000' }), /"target"/],
    [withFigure({ suite: 'store' }), /does not start with its suite/],
    [withFigure({ extra: 1 }), /unknown field "extra"/],
    [withFigure({ title: '' }), /"title"/],
  ];
  for (const [json, message] of refusals) assert.throws(() => parseBaseline(json), message);
  const { measured: _dropped, ...withoutMeasured } = first;
  assert.throws(() => parseBaseline({ ...good, figures: [withoutMeasured] }), /"measured" is missing/);
  assert.throws(() => parseBaseline({ ...good, figures: [first, first] }), /appears twice/);
  assert.throws(() => parseBaseline({ ...good, version: 1 }), /version/);
  assert.doesNotThrow(() => parseBaseline(withFigure({ measured: null })), 'a tracked figure not measured yet');
});

test('numbers are written for reading: separators, and fewer decimals as they grow', () => {
  assert.equal(formatNumber(1_632_898), '1,632,898');
  assert.equal(formatNumber(325_661.5), '325,662');
  assert.equal(formatNumber(270.55), '270.6');
  assert.equal(formatNumber(0.9845), '0.985');
  assert.equal(formatNumber(4), '4');
});

test('a figure not measured yet has a row that says so, its target beside it', () => {
  const good = parseBaseline(baselineJson);
  const first = good.figures[0];
  assert.ok(first !== undefined);
  const table = figuresTable({ ...good, figures: [{ ...first, target: 2, better: 'lower', unit: 'B', measured: null }] });
  assert.ok(table.includes(`| ${first.title} | not measured yet | — | ≤ 2 B | \`${first.name}\` |`), table);
});

test('the markers are where the table goes; a README without them is refused', () => {
  const table = '| a |\n|---|';
  const doc = `# x\n${beginMarker}\nold\n${endMarker}\nafter\n`;
  assert.equal(withFigures(doc, table), `# x\n${beginMarker}\n${table}\n${endMarker}\nafter\n`);
  assert.throws(() => withFigures('# x\n', table), /markers/);
});
