// Readable text for query results: aligned tables for lists of records, "key: value" lines
// for scalars, and nested lists (a shard's nodes) as indented tables titled by their parent.
// One generic renderer serves every query, so a new attachment field shows up without code.

type Row = Record<string, unknown>;

const isRecord = (value: unknown): value is Row => typeof value === 'object' && value !== null && !Array.isArray(value);
const isScalar = (value: unknown): boolean => value === null || ['string', 'number', 'boolean'].includes(typeof value);

/** Terminal columns a string takes: wide East Asian characters and most emoji take two. */
export function displayWidth(text: string): number {
  let width = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0) ?? 0;
    if (cp < 0x20 || (cp >= 0x300 && cp <= 0x36f) || cp === 0x200d || (cp >= 0xfe00 && cp <= 0xfe0f)) continue;
    const wide =
      (cp >= 0x1100 && cp <= 0x115f) ||
      (cp >= 0x2e80 && cp <= 0xa4cf) ||
      (cp >= 0xac00 && cp <= 0xd7a3) ||
      (cp >= 0xf900 && cp <= 0xfaff) ||
      (cp >= 0xfe30 && cp <= 0xfe4f) ||
      (cp >= 0xff00 && cp <= 0xff60) ||
      (cp >= 0xffe0 && cp <= 0xffe6) ||
      (cp >= 0x1f300 && cp <= 0x1faff) ||
      (cp >= 0x20000 && cp <= 0x3fffd);
    width += wide ? 2 : 1;
  }
  return width;
}

const padEnd = (text: string, width: number): string => text + ' '.repeat(Math.max(0, width - displayWidth(text)));

export function formatCell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'string') return value === '' ? '-' : value.replace(/[\r\n\t]+/g, ' ');
  if (isScalar(value)) return String(value);
  return JSON.stringify(value);
}

/** An aligned table: header, a dashed rule, one line per row. Columns default to the rows' scalar keys, in first-seen order. */
export function renderTable(rows: Row[], columns?: string[]): string {
  const cols = columns ?? scalarColumns(rows);
  if (cols.length === 0) return '';
  // A column is any key some row has (the server's): a row without it shows '-', never what
  // Object.prototype has under that name (a column `constructor` would print a function).
  const cells = rows.map((row) => cols.map((c) => formatCell(Object.hasOwn(row, c) ? row[c] : undefined)));
  const widths = cols.map((c, i) => Math.max(displayWidth(c), ...cells.map((r) => displayWidth(r[i]))));
  const line = (values: string[]) => values.map((v, i) => (i === values.length - 1 ? v : padEnd(v, widths[i]))).join('  ').trimEnd();
  return [line(cols.map((c) => c.toUpperCase())), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

function scalarColumns(rows: Row[]): string[] {
  const seen = new Set<string>();
  for (const row of rows) for (const [key, value] of Object.entries(row)) if (!Array.isArray(value) && !isRecord(value)) seen.add(key);
  return [...seen];
}

/** How to title a row's nested lists: its *_name, else its *_id, else its position. */
function rowTitle(row: Row, index: number): string {
  const key = Object.keys(row).find((k) => k.endsWith('_name')) ?? Object.keys(row).find((k) => k.endsWith('_id'));
  return key ? `${key} ${formatCell(row[key])}` : `#${index + 1}`;
}

const indent = (text: string, by: string): string =>
  text
    .split('\n')
    .map((line) => (line === '' ? line : by + line))
    .join('\n');

function renderList(key: string, list: unknown[]): string {
  if (list.length === 0) return `${key}: (none)`;
  if (!list.every(isRecord)) return `${key}: ${list.map(formatCell).join(', ')}`;
  const parts = [`${key} (${list.length}):`, indent(renderTable(list), '  ')];
  list.forEach((row, index) => {
    for (const [childKey, child] of Object.entries(row)) {
      if (Array.isArray(child)) parts.push(indent(renderList(`${childKey} of ${rowTitle(row, index)}`, child), '  '));
      else if (isRecord(child)) parts.push(indent(`${childKey} of ${rowTitle(row, index)}:\n${indent(renderRecord(child), '  ')}`, '  '));
    }
  });
  return parts.join('\n');
}

/** Any attachment as text: scalars first as aligned "key: value" lines, then lists and nested records. */
export function renderRecord(record: Row): string {
  const entries = Object.entries(record);
  const scalars = entries.filter(([, v]) => !Array.isArray(v) && !isRecord(v));
  const width = Math.max(0, ...scalars.map(([k]) => displayWidth(k) + 1));
  const blocks: string[] = [];
  if (scalars.length > 0) blocks.push(scalars.map(([k, v]) => `${padEnd(`${k}:`, width)} ${formatCell(v)}`).join('\n'));
  for (const [key, value] of entries) {
    if (Array.isArray(value)) blocks.push(renderList(key, value));
    else if (isRecord(value)) blocks.push(`${key}:\n${indent(renderRecord(value), '  ')}`);
  }
  return blocks.join('\n\n');
}

export function renderAttachment(attachment: Row | null): string {
  if (attachment === null || Object.keys(attachment).length === 0) return '(no result fields)';
  return renderRecord(attachment);
}
