// Row values and keys between the manager and the agents' shard sessions and moves, as
// JSON: what mysql2 gives (strings, numbers, null, Buffers for binary strings) survives the
// trip. A Buffer travels as {"$b64": "..."}; anything else JSON already carries as it is
// (the sessions read dates, decimals and big integers as text).

const B64 = '$b64';

/** JSON text of `value`, Buffers (and Uint8Arrays) encoded so that parseValues gives them back. */
export function stringifyValues(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v && typeof v === 'object' && (v as { type?: unknown }).type === 'Buffer' && Array.isArray((v as { data?: unknown }).data)) return { [B64]: Buffer.from((v as { data: number[] }).data).toString('base64') };
    if (v instanceof Uint8Array) return { [B64]: Buffer.from(v).toString('base64') };
    return v;
  });
}

/** The value stringifyValues wrote, Buffers restored; '' is undefined. */
export function parseValues<T = unknown>(text: string): T {
  if (text === '') return undefined as T;
  return JSON.parse(text, (_key, v: unknown) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const keys = Object.keys(v);
      if (keys.length === 1 && keys[0] === B64 && typeof (v as Record<string, unknown>)[B64] === 'string') return Buffer.from((v as Record<string, string>)[B64], 'base64');
    }
    return v;
  }) as T;
}
