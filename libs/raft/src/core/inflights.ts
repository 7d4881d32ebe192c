// Flow control for one follower in the replicate state: a ring of the last index of each
// App message still unacknowledged. The leader stops sending when either the count or
// the byte total reaches its limit, and frees slots as AppResps acknowledge them.

export class Inflights {
  private readonly lastIndexes: Float64Array;
  private readonly sizes: Float64Array;
  private start = 0;
  private count_ = 0;
  private bytes_ = 0;

  constructor(private readonly maxMsgs: number, private readonly maxBytes: number) {
    this.lastIndexes = new Float64Array(maxMsgs);
    this.sizes = new Float64Array(maxMsgs);
  }

  get count(): number {
    return this.count_;
  }

  get bytes(): number {
    return this.bytes_;
  }

  /** Records one App message whose last entry is `lastIndex` and whose entries total `bytes`. */
  add(lastIndex: number, bytes: number): void {
    if (this.count_ >= this.maxMsgs) throw new Error('inflights: add while full');
    const slot = (this.start + this.count_) % this.maxMsgs;
    this.lastIndexes[slot] = lastIndex;
    this.sizes[slot] = bytes;
    this.count_++;
    this.bytes_ += bytes;
  }

  /** Frees every message whose last index is <= `index` (they are acknowledged). */
  freeLE(index: number): void {
    while (this.count_ > 0 && this.lastIndexes[this.start] <= index) {
      this.bytes_ -= this.sizes[this.start];
      this.start = (this.start + 1) % this.maxMsgs;
      this.count_--;
    }
    if (this.count_ === 0) {
      this.start = 0;
      this.bytes_ = 0;
    }
  }

  full(): boolean {
    return this.count_ >= this.maxMsgs || this.bytes_ >= this.maxBytes;
  }

  reset(): void {
    this.start = 0;
    this.count_ = 0;
    this.bytes_ = 0;
  }
}
