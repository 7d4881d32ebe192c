// Lowe's memoization for the WGL search: a set of (linearized operations, model state)
// configurations already explored. Reaching a configuration a second time, by another
// order of the same operations, cannot lead anywhere new, so the search prunes it.

import type { Bitset } from './bitset';

interface Configuration<S> {
  linearized: Uint32Array;
  state: S;
}

/** FNV-1a over a string, 32-bit. */
function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h | 0;
}

/**
 * A 32-bit hash of a state: the model's own `hash` if it has one, else a hash of a
 * primitive state; object states without `hash` all share 0 and rely on `equal`.
 */
export function makeStateHasher<S>(modelHash: ((state: S) => string) | undefined): (state: S) => number {
  if (modelHash) return (state) => hashString(modelHash(state));
  return (state) => {
    switch (typeof state) {
      case 'string':
        return hashString(state);
      case 'number':
        return Number.isInteger(state) ? Math.imul(state | 0, 0x27d4eb2d) ^ (state / 4294967296) : hashString(String(state));
      case 'boolean':
        return state ? 0x5bd1e995 : 0x1b873593;
      default:
        return state === null ? 0x3c6ef372 : 0;
    }
  };
}

export class ConfigurationMemo<S> {
  private readonly buckets = new Map<number, Configuration<S>[]>();

  constructor(
    private readonly stateHash: (state: S) => number,
    private readonly stateEqual: (a: S, b: S) => boolean,
  ) {}

  /** Forget everything (frees the memory once a search is decided). */
  clear(): void {
    this.buckets.clear();
  }

  /**
   * Record (linearized, state); returns false if it was already recorded, i.e. the search
   * has been here before and must not descend again.
   */
  addIfNew(linearized: Bitset, state: S): boolean {
    const key = (linearized.hash ^ Math.imul(this.stateHash(state), 0x2c1b3c6d)) | 0;
    const bucket = this.buckets.get(key);
    if (bucket === undefined) {
      this.buckets.set(key, [{ linearized: linearized.snapshot(), state }]);
      return true;
    }
    for (const seen of bucket) {
      if (linearized.matches(seen.linearized) && this.stateEqual(seen.state, state)) return false;
    }
    bucket.push({ linearized: linearized.snapshot(), state });
    return true;
  }
}
