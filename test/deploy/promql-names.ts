// Just enough PromQL reading to list the metric names an expression selects: strings, label
// matchers, range/offset durations and `by (...)` label lists are removed, and what is left
// that is neither a function call, an aggregation nor a keyword is a metric name.

export interface PromqlExpression {
  expr: string;
  /** Where it was found, for the failure message. */
  where: string;
}

const KEYWORDS = new Set(['and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset', 'inf', 'nan']);

export function metricNamesIn(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of bare.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?/g)) {
    const word = m[0].replace(/\s*\($/, '');
    if (m[1] || KEYWORDS.has(word.toLowerCase())) continue; // a function or aggregation, or a keyword
    if (/^\d/.test(word)) continue;
    names.add(word);
  }
  return [...names];
}

/** Every PromQL expression of a Grafana dashboard (JSON) or a Prometheus rule file (YAML, one `expr:` per line). */
export function promqlExpressionsOf(kind: 'grafana' | 'alerts', text: string): PromqlExpression[] {
  if (kind === 'alerts') {
    return [...text.matchAll(/^\s*expr:\s*(.+)$/gm)].map((m, i) => ({ expr: m[1].trim(), where: `alert rule ${i + 1}` }));
  }
  const found: PromqlExpression[] = [];
  const walk = (node: unknown, title: string): void => {
    if (Array.isArray(node)) return node.forEach((n) => walk(n, title));
    if (node === null || typeof node !== 'object') return;
    const obj = node as Record<string, unknown>;
    const here = typeof obj.title === 'string' ? obj.title : title;
    if (typeof obj.expr === 'string') found.push({ expr: obj.expr, where: `panel "${here}"` });
    if (typeof obj.query === 'string' && /\(/.test(obj.query)) found.push({ expr: obj.query.replace(/^label_values\((.*),\s*\w+\)$/, '$1'), where: `variable "${String(obj.name)}"` });
    for (const value of Object.values(obj)) walk(value, here);
  };
  walk(JSON.parse(text), '');
  return found;
}
