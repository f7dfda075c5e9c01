// bench/svg-chart.ts draws well-formed SVG: every element closes in order, attributes are
// quoted, text carries no raw `<` or `&` (names with markup characters are escaped), and the
// drawn marks match the data (one bar a value, one point a sample, widths in proportion).
// No XML parser is installed here, so `wellFormed` is a small strict checker of the subset
// the module writes (declaration, elements, attributes, text, entities).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { barChartSvg, lineChartSvg, niceTicks } from '../../bench/svg-chart.ts';

const entity = /^&(amp|lt|gt|quot|apos);/;

/** Throws on the first well-formedness error; returns the element names in document order. */
function wellFormed(xml: string): string[] {
  const names: string[] = [];
  const open: string[] = [];
  let at = xml.startsWith('<?xml') ? xml.indexOf('?>') + 2 : 0;
  while (at < xml.length) {
    const lt = xml.indexOf('<', at);
    const text = xml.slice(at, lt === -1 ? xml.length : lt);
    for (let i = text.indexOf('&'); i !== -1; i = text.indexOf('&', i + 1)) {
      if (!entity.test(text.slice(i))) throw new Error(`raw & in text at ${at + i}`);
    }
    if (text.includes('>')) throw new Error(`raw > in text at ${at}`);
    if (lt === -1) break;
    const gt = xml.indexOf('>', lt);
    if (gt === -1) throw new Error(`unclosed tag at ${lt}`);
    const tag = xml.slice(lt + 1, gt);
    if (tag.startsWith('/')) {
      const name = tag.slice(1).trim();
      if (open.pop() !== name) throw new Error(`</${name}> closes the wrong element at ${lt}`);
    } else {
      const selfClosing = tag.endsWith('/');
      const body = selfClosing ? tag.slice(0, -1) : tag;
      const match = /^([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*$/.exec(body);
      if (match === null) throw new Error(`malformed tag <${tag}> at ${lt}`);
      const attributes = (match[2] ?? '').match(/[\w:-]+(?==")/g) ?? [];
      if (new Set(attributes).size !== attributes.length) throw new Error(`repeated attribute in <${tag}>`);
      for (const value of (match[2] ?? '').match(/"[^"]*"/g) ?? []) {
        for (let i = value.indexOf('&'); i !== -1; i = value.indexOf('&', i + 1)) {
          if (!entity.test(value.slice(i))) throw new Error(`raw & in attribute of <${tag}>`);
        }
      }
      names.push(match[1] as string);
      if (!selfClosing) open.push(match[1] as string);
    }
    at = gt + 1;
  }
  if (open.length > 0) throw new Error(`unclosed elements: ${open.join(', ')}`);
  return names;
}

test('the checker itself rejects broken documents', () => {
  assert.throws(() => wellFormed('<svg><g></svg>'));
  assert.throws(() => wellFormed('<svg><text>a & b</text></svg>'));
  assert.throws(() => wellFormed('<svg><rect x=1/></svg>'));
  assert.deepEqual(wellFormed('<svg><text>a &amp; b</text><rect x="1"/></svg>'), ['svg', 'text', 'rect']);
});

test('a bar chart is well-formed, escapes labels and draws one bar per value, in proportion', () => {
  const svg = barChartSvg({
    title: 'RAM <per> timer & key',
    unit: 'bytes',
    bars: [
      { label: 'a<b>&"c"', value: 100 },
      { label: 'store.resident.bytes_per_timer', value: 50 },
    ],
  });
  const names = wellFormed(svg);
  assert.equal(names[0], 'svg');
  assert.match(svg, /xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  assert.match(svg, /a&lt;b&gt;&amp;&quot;c&quot;/);
  const widths = [...svg.matchAll(/<rect x="\d+" y="[\d.]+" width="([\d.]+)" height="22"/g)].map((m) => Number(m[1]));
  assert.equal(widths.length, 2);
  assert.ok(Math.abs((widths[0] as number) - 2 * (widths[1] as number)) < 0.2, `bar widths ${widths.join(', ')} are not 2:1`);
});

test('a line chart is well-formed and has one point per sample, tail scale included', () => {
  const points: [number, number][] = [
    [0, 0.4],
    [50, 1.2],
    [99, 3.5],
    [99.9, 9],
    [100, 12],
  ];
  for (const xScale of ['linear', 'tail'] as const) {
    const svg = lineChartSvg({ title: 'lateness', xLabel: 'percentile', yLabel: 'ms', points, xScale });
    const names = wellFormed(svg);
    assert.equal(names.filter((name) => name === 'circle').length, points.length);
    const xs = [...svg.matchAll(/<circle cx="([\d.]+)"/g)].map((m) => Number(m[1]));
    assert.deepEqual([...xs].sort((a, b) => a - b), xs, 'points run left to right');
    assert.ok(xs.every((x) => Number.isFinite(x) && x >= 0 && x <= 720), `x out of the picture: ${xs.join(', ')}`);
  }
});

test('ticks start at zero and reach a round top at or above the maximum', () => {
  assert.deepEqual(niceTicks(9.3, 5), [0, 2, 4, 6, 8, 10]);
  assert.deepEqual(niceTicks(230, 5), [0, 50, 100, 150, 200, 250]);
  assert.deepEqual(niceTicks(0, 5), [0, 0.2, 0.4, 0.6, 0.8, 1]);
});
