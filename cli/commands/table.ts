// Rows of text as a table for a terminal: columns as wide as their widest cell (at most
// `maxWidth`, cut with "…"), separated by two spaces, a header in capitals.

export function table(headers: readonly string[], rows: readonly (readonly string[])[], maxWidth = 48): string {
  const cut = (text: string): string => (text.length > maxWidth ? `${text.slice(0, maxWidth - 1)}…` : text);
  const cells = [headers.map((h) => h.toUpperCase()), ...rows.map((row) => row.map(cut))];
  const widths = headers.map((_, c) => Math.max(...cells.map((row) => (row[c] ?? '').length)));
  return cells.map((row) => row.map((cell, c) => (c === row.length - 1 ? cell : cell.padEnd(widths[c] as number))).join('  ').trimEnd()).join('\n') + '\n';
}
