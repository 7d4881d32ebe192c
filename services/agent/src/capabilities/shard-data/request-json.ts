// The JSON fields of ShardDataAgent requests (values.ts in @kcm/agent-api: Buffers as
// {"$b64": ...}): text that is not JSON, or not the shape a field needs, is the caller's error.

import { AgentFailure, parseValues } from '@kcm/agent-api';

export function jsonField<T>(name: string, text: string): T {
  try {
    return parseValues<T>(text);
  } catch (err) {
    throw new AgentFailure('invalid_argument', `${name} is not JSON: ${(err as Error).message}`);
  }
}

/** A field holding a JSON array ('' for an empty one). */
export function jsonArray(name: string, text: string): unknown[] {
  const value = text ? jsonField<unknown>(name, text) : [];
  if (!Array.isArray(value)) throw new AgentFailure('invalid_argument', `${name} must be a JSON array`);
  return value;
}
