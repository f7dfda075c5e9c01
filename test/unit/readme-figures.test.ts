// README.md's figures table against bench/baseline.json: the table is regenerated in memory and
// must equal what README.md holds between its markers; the baseline's shape is checked by the
// same parser the generator uses, and that parser and bench/baseline.schema.json must agree.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  beginMarker,
  endMarker,
  figureFields,
  figuresTable,
  formatNumber,
  parseBaseline,
  readBaseline,
  withFigures,
} from '../../scripts/figures-table.ts';

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

test('the parser and bench/baseline.schema.json ask for the same fields', () => {
  const schema = JSON.parse(readFileSync(join(root, 'bench', 'baseline.schema.json'), 'utf8')) as {
    $defs: { figure: { required: string[]; properties: Record<string, unknown> } };
  };
  assert.deepEqual(schema.$defs.figure.required, [...figureFields]);
  assert.deepEqual(Object.keys(schema.$defs.figure.properties), [...figureFields]);
});

test('a baseline of the wrong shape is refused with the field named', () => {
  const good = parseBaseline(baselineJson);
  const first = good.figures[0];
  assert.ok(first !== undefined);
  const withFigure = (change: Record<string, unknown>): unknown => ({ ...good, figures: [{ ...first, ...change }] });
  const refusals: ReadonlyArray<[Record<string, unknown>, RegExp]> = [
    [{ median: first.max + 1 }, /min ≤ median ≤ max/],
    [{ runs: 0 }, /"runs"/],
    [{ unit: 'timers' }, /unit "timers"/],
    [{ better: 'up' }, /"better"/],
    [{ target: '300000' }, /"target"/],
    [{ date: '5 Dec 2026' }, /"date"/],
    [{ commit: 'HEAD' }, /"commit"/],
    [{ machine: 'laptop' }, /machine "laptop"/],
    [{ suite: 'store' }, /does not start with its suite/],
    [{ extra: 1 }, /unknown field "extra"/],
    [{ source: '' }, /"source"/],
  ];
  for (const [change, message] of refusals) assert.throws(() => parseBaseline(withFigure(change)), message);
  const { source: _dropped, ...withoutSource } = first;
  assert.throws(() => parseBaseline({ ...good, figures: [withoutSource] }), /"source"/);
  assert.throws(() => parseBaseline({ ...good, figures: [first, first] }), /appears twice/);
  assert.throws(() => parseBaseline({ ...good, version: 2 }), /version/);
});

test('numbers are written for reading: separators, and fewer decimals as they grow', () => {
  assert.equal(formatNumber(1_632_898), '1,632,898');
  assert.equal(formatNumber(325_661.5), '325,662');
  assert.equal(formatNumber(270.55), '270.6');
  assert.equal(formatNumber(0.9845), '0.985');
  assert.equal(formatNumber(4), '4');
});

test('the markers are where the table goes; a README without them is refused', () => {
  const table = '| a |\n|---|';
  const doc = `# x\n${beginMarker}\nold\n${endMarker}\nafter\n`;
  assert.equal(withFigures(doc, table), `# x\n${beginMarker}\n${table}\n${endMarker}\nafter\n`);
  assert.throws(() => withFigures('# x\n', table), /markers/);
});
