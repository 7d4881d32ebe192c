/**
 * Reading the paras schemas as data, so that field order (for messages) and help text
 * (describeJob) come from the same definitions that validate.
 */
import { z } from 'zod';
import { fieldRules } from './formats';

type AnySchema = z.ZodType;

function defOf(schema: AnySchema): Record<string, unknown> & { type: string } {
  return schema._zod.def as unknown as Record<string, unknown> & { type: string };
}

/** The z.object at the core of a paras schema (under refinements and a final transform). */
export function objectShapeOf(schema: AnySchema): Record<string, AnySchema> | undefined {
  let current: AnySchema | undefined = schema;
  while (current) {
    const def = defOf(current);
    if (def.type === 'object') return (current as z.ZodObject).shape as Record<string, AnySchema>;
    current = (def.type === 'pipe' ? def.in : undefined) as AnySchema | undefined;
  }
  return undefined;
}

export interface FieldFacts {
  required: boolean;
  /** The default the schema fills in when the field is absent, as sent on the wire. */
  defaultValue?: unknown;
  /** The rule in words, from the format builder (formats.ts) or the JSON type. */
  rule: string;
  /** For an array of objects: the element's fields. */
  items?: Record<string, AnySchema>;
}

/** Peels optional/default/pipe wrappers off one field, collecting what help text needs. */
export function fieldFacts(field: AnySchema): FieldFacts {
  let required = true;
  let defaultValue: unknown;
  let rule: string | undefined;
  let items: Record<string, AnySchema> | undefined;
  let current: AnySchema | undefined = field;
  while (current) {
    rule ??= fieldRules.get(current)?.rule;
    const def = defOf(current);
    if (def.type === 'optional') {
      required = false;
      current = def.innerType as AnySchema;
    } else if (def.type === 'default') {
      required = false;
      const raw = def.defaultValue;
      defaultValue = typeof raw === 'function' ? (raw as () => unknown)() : raw;
      current = def.innerType as AnySchema;
    } else if (def.type === 'pipe') {
      current = def.in as AnySchema;
    } else {
      if (def.type === 'array') {
        const element = def.element as AnySchema;
        items = objectShapeOf(element);
        rule ??= items ? `array of objects {${Object.keys(items).join(', ')}}` : `array of ${fieldFacts(element).rule}`;
      }
      rule ??= def.type;
      current = undefined;
    }
  }
  if (typeof defaultValue === 'boolean') defaultValue = defaultValue ? '1' : '0';
  return { required, defaultValue, rule: rule ?? 'any', items };
}
