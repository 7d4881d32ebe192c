// Measures how long each member goes without answering: one polling loop per member,
// each recording when a call succeeded. The longest silence of a member is the longest
// stretch between two successes (or from the start / to the end) while it was expected up.

import { sleep } from './processes';

export interface MemberAvailability {
  member: string;
  successes: number;
  failures: number;
  /** Longest time (ms) without a successful answer while the member was polled. */
  longestGapMs: number;
  /** A sample of what failures said, for the assertion message. */
  failureSamples: string[];
}

export class AvailabilityProbe {
  private readonly loops: Promise<void>[] = [];
  private readonly state = new Map<string, { lastOk: number; longestGap: number; successes: number; failures: number; samples: string[]; active: boolean }>();
  private running = true;

  /**
   * @param call one request to a member; resolves on a successful answer, throws otherwise.
   * @param everyMs pause between the end of one call and the next, per member.
   */
  constructor(private readonly call: (member: string) => Promise<unknown>, private readonly everyMs = 200) {}

  /** Starts polling `member`; its silence is counted from now. */
  watch(member: string): void {
    const now = Date.now();
    this.state.set(member, { lastOk: now, longestGap: 0, successes: 0, failures: 0, samples: [], active: true });
    this.loops.push(this.loop(member));
  }

  /** Stops polling `member` (it is about to be killed): its silence from now on is not counted. */
  unwatch(member: string): void {
    const s = this.state.get(member);
    if (s) s.active = false;
  }

  private async loop(member: string): Promise<void> {
    const s = this.state.get(member)!;
    while (this.running && s.active) {
      try {
        await this.call(member);
        if (!s.active) break;
        const now = Date.now();
        s.longestGap = Math.max(s.longestGap, now - s.lastOk);
        s.lastOk = now;
        s.successes++;
      } catch (err) {
        s.failures++;
        if (s.samples.length < 5) s.samples.push((err as Error).message);
      }
      await sleep(this.everyMs);
    }
  }

  /** Stops every loop and reports per member. A member still watched is charged its silence up to now. */
  async stop(): Promise<MemberAvailability[]> {
    const end = Date.now();
    this.running = false;
    for (const s of this.state.values()) if (s.active) s.longestGap = Math.max(s.longestGap, end - s.lastOk);
    await Promise.all(this.loops);
    return [...this.state].map(([member, s]) => ({ member, successes: s.successes, failures: s.failures, longestGapMs: s.longestGap, failureSamples: s.samples }));
  }
}
