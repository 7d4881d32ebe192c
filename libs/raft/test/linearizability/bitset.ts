// A fixed-size set of operation indices on a Uint32Array, with a set-hash kept up to date on
// every change, so the search can look up "this set of linearized operations" in O(1) and
// compare words only on a hash match.

/** A well-mixed 32-bit value per index; the set's hash is the XOR of its members' values. */
function mixIndex(index: number): number {
  let h = Math.imul(index + 1, 0x9e3779b1);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) | 0;
}

export class Bitset {
  readonly words: Uint32Array;
  /** XOR of mixIndex over members: order-independent, updated in O(1). */
  hash = 0;

  constructor(size: number) {
    this.words = new Uint32Array(Math.ceil(size / 32));
  }

  has(index: number): boolean {
    return (this.words[index >>> 5] & (1 << (index & 31))) !== 0;
  }

  /** Add `index`; it must not be a member already (the hash would go wrong). */
  add(index: number): void {
    this.words[index >>> 5] |= 1 << (index & 31);
    this.hash ^= mixIndex(index);
  }

  /** Remove `index`; it must be a member. */
  remove(index: number): void {
    this.words[index >>> 5] &= ~(1 << (index & 31));
    this.hash ^= mixIndex(index);
  }

  /** A frozen copy of the members, for storing in the memo table. */
  snapshot(): Uint32Array {
    return this.words.slice();
  }

  equalsWords(other: Uint32Array): boolean {
    const words = this.words;
    for (let i = 0; i < words.length; i++) {
      if (words[i] !== other[i]) return false;
    }
    return true;
  }
}
