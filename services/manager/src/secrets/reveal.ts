// Job results keep passwords sealed, as the state does (create_cluster's computer_pwd and
// storage_pwd). get_status opens them for a caller allowed to see them and shows
// HIDDEN_SECRET to any other, so a reply never carries ciphertext either.

import { isSealed, type SecretBox } from './secret-box';

export const HIDDEN_SECRET = '<hidden>';

/** A copy of `value` with every sealed string opened (`reveal`) or replaced by HIDDEN_SECRET. */
export function revealSealed<T>(value: T, box: SecretBox, reveal: boolean): T {
  return walk(value, box, reveal) as T;
}

function walk(value: unknown, box: SecretBox, reveal: boolean): unknown {
  if (isSealed(value)) return reveal ? box.open(value) : HIDDEN_SECRET;
  if (Array.isArray(value)) return value.map((v) => walk(v, box, reveal));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = Object.create(Object.getPrototypeOf(value) === null ? null : Object.prototype);
  for (const [k, v] of Object.entries(value)) out[k] = walk(v, box, reveal);
  return out;
}

/** True when `value` holds a sealed string anywhere (the reply then says whether they were hidden). */
export function holdsSealed(value: unknown): boolean {
  if (isSealed(value)) return true;
  if (Array.isArray(value)) return value.some(holdsSealed);
  if (value === null || typeof value !== 'object') return false;
  return Object.values(value).some(holdsSealed);
}
