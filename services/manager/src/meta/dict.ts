// Dictionaries keyed by strings that come from clients or from the Raft log (request ids,
// job ids, host addresses, object ids). A plain `{}` answers `toString`, `constructor` or
// `__proto__` from Object.prototype, and assigning `obj['__proto__'] = x` changes its
// prototype instead of storing x: a request id named so was acknowledged and then lost.
// A dict has no prototype, so every key is only what was stored under it.
//
// The state is serialised as JSON (snapshot image, log entries); JSON.parse rebuilds plain
// objects, so whatever reads state back turns its dicts into dicts again (see restoreDicts).

export type Dict<T> = Record<string, T>;

/** An empty dictionary with no prototype; `entries` are copied in as own keys. */
export function dict<T>(entries?: Readonly<Record<string, T>>): Dict<T> {
  const d = Object.create(null) as Dict<T>;
  // Object.assign sets each own key, "__proto__" included: a null-prototype target has no
  // __proto__ setter, so the key becomes an ordinary own property.
  if (entries) Object.assign(d, entries);
  return d;
}

/** The value stored under `key`, never one inherited from Object.prototype (for objects that may not be dicts). */
export function own<T>(obj: Readonly<Record<string, T>> | undefined, key: string): T | undefined {
  return obj !== undefined && Object.hasOwn(obj, key) ? obj[key] : undefined;
}
