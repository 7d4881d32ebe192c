/**
 * Turns zod issues into the one error message style of the protocol:
 * `<path>: <rule>, got <json value>`, several joined with `; ` in field order.
 * Rules written by the format builders (formats.ts) win; the error map below words the
 * generic cases (missing field, wrong JSON type, value outside an enum).
 */
import type { z } from 'zod';

/** Messages longer than this are cut: a reply should name the problem, not echo a megabyte. */
const MAX_VALUE_CHARS = 80;
const MAX_ISSUES = 8;

const JSON_TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  array: 'an array',
  object: 'an object',
  number: 'a number',
  boolean: 'a boolean',
};

/** Error map passed to every parse: generic issues phrased as rules. */
export const wireErrorMap = (issue: z.core.$ZodRawIssue): string | undefined => {
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) return 'is required';
      return `must be ${JSON_TYPE_NAMES[issue.expected] ?? issue.expected}`;
    case 'invalid_value':
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'too_small':
      return issue.origin === 'array' ? `must have at least ${issue.minimum} item(s)` : undefined;
    case 'too_big':
      return issue.origin === 'array' ? `must have at most ${issue.maximum} item(s)` : undefined;
    default:
      return undefined;
  }
};

export const PARSE_OPTIONS = { reportInput: true, error: wireErrorMap } as const;

/**
 * safeParse whose issues, if any, are worded for the wire (PARSE_OPTIONS). Valid input,
 * the usual case, is parsed without the options: they change only the issues, yet made a
 * valid create_machine's paras take 11 us instead of 7. Invalid input is parsed again with
 * them, so its issues are exactly those a parse with the options gives.
 */
export function safeParseWire<T extends z.ZodType>(schema: T, value: unknown): ReturnType<T['safeParse']> {
  const plain = schema.safeParse(value);
  return (plain.success ? plain : schema.safeParse(value, PARSE_OPTIONS)) as ReturnType<T['safeParse']>;
}

/** `paras.rb_nodes[0].port` */
export function formatPath(prefix: string, path: readonly PropertyKey[]): string {
  let out = prefix;
  for (const key of path) {
    out += typeof key === 'number' ? `[${key}]` : out === '' ? String(key) : `.${String(key)}`;
  }
  return out === '' ? 'body' : out;
}

/** The value as JSON, shortened; well-formed even for lone surrogates (JSON.stringify escapes them). */
export function quoteValue(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > MAX_VALUE_CHARS ? `${text.slice(0, MAX_VALUE_CHARS)}...` : text;
}

export interface FormattedIssues {
  message: string;
  /** Path of the first problem, e.g. `paras.nodes`. */
  field: string;
}

/**
 * One message for all issues. `fieldOrder` (the schema's top-level keys) orders problems
 * as the fields are declared, so cross-field problems sit beside the field they concern.
 */
export function formatIssues(prefix: string, issues: readonly z.core.$ZodIssue[], fieldOrder: readonly string[] = []): FormattedIssues {
  const rank = (issue: z.core.$ZodIssue) => {
    const i = fieldOrder.indexOf(String(issue.path[0]));
    return i === -1 ? fieldOrder.length : i;
  };
  const sorted = issues
    .map((issue, index) => ({ issue, index }))
    .sort((a, b) => rank(a.issue) - rank(b.issue) || a.index - b.index)
    .map(({ issue }) => issue);
  const parts = sorted.slice(0, MAX_ISSUES).map((issue) => {
    const where = formatPath(prefix, issue.path);
    // A missing field has no value to quote (zod would otherwise quote the parent object).
    const missing = issue.message.startsWith('is required');
    const got = !missing && 'input' in issue && issue.input !== undefined ? `, got ${quoteValue(issue.input)}` : '';
    return `${where}: ${issue.message}${got}`;
  });
  if (sorted.length > MAX_ISSUES) parts.push(`and ${sorted.length - MAX_ISSUES} more problem(s)`);
  return { message: parts.join('; '), field: formatPath(prefix, sorted[0]?.path ?? []) };
}
