// A fixed-size set of operation indices on a Uint32Array, with a set-hash kept up to date on
// every change, so the search can look up "this set of linearized operations" in O(1) and
// compare words only on a hash match.
//
// The memo stores one snapshot per explored configuration, so snapshots are compact: with
// operations numbered in call order, a linearized set is "everything below some point, plus
// a few past it", and a snapshot holds only the words past the full prefix. Memory then
// grows with the concurrency of the history, not with its length.

/** A well-mixed 32-bit value per index; the set's hash is the XOR of its members' values. */
function mixIndex(index: number): number {
  let h = Math.imul(index + 1, 0x9e3779b1);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) | 0;
}

const FULL_WORD = 0xffffffff;

export class Bitset {
  private readonly words: Uint32Array;
  /** XOR of mixIndex over members: order-independent, updated in O(1). */
  hash = 0;
  /** Every word below this index is full, and this one is not (or is past the end). */
  private fullWords = 0;
  /** The highest word that is not zero, or -1 when the set is empty. */
  private topWord = -1;

  constructor(size: number) {
    this.words = new Uint32Array(Math.ceil(size / 32));
  }

  has(index: number): boolean {
    return (this.words[index >>> 5] & (1 << (index & 31))) !== 0;
  }

  /** Add `index`; it must not be a member already (the hash would go wrong). */
  add(index: number): void {
    const word = index >>> 5;
    this.words[word] |= 1 << (index & 31);
    this.hash ^= mixIndex(index);
    if (word > this.topWord) this.topWord = word;
    while (this.fullWords < this.words.length && this.words[this.fullWords] === FULL_WORD) this.fullWords++;
  }

  /** Remove `index`; it must be a member. */
  remove(index: number): void {
    const word = index >>> 5;
    this.words[word] &= ~(1 << (index & 31));
    this.hash ^= mixIndex(index);
    if (word < this.fullWords) this.fullWords = word;
    while (this.topWord >= 0 && this.words[this.topWord] === 0) this.topWord--;
  }

  /**
   * A frozen, canonical copy of the members: [count of leading full words, then every word
   * from there to the highest non-zero one]. Equal sets give equal snapshots.
   */
  snapshot(): Uint32Array {
    const tail = Math.max(0, this.topWord - this.fullWords + 1);
    const copy = new Uint32Array(1 + tail);
    copy[0] = this.fullWords;
    copy.set(this.words.subarray(this.fullWords, this.fullWords + tail), 1);
    return copy;
  }

  /** Whether this set equals the one `snapshot()` captured. */
  matches(snapshot: Uint32Array): boolean {
    if (snapshot[0] !== this.fullWords || snapshot.length !== 1 + Math.max(0, this.topWord - this.fullWords + 1)) return false;
    const words = this.words;
    for (let i = 1, word = this.fullWords; i < snapshot.length; i++, word++) {
      if (snapshot[i] !== words[word]) return false;
    }
    return true;
  }
}
