// Which kcm build every member of the manager group runs: each member asks every other one
// (Member.Describe) every few seconds and on demand, and remembers the last answer. This is
// what get_meta_mode shows and what the leader's version gate (protocol-gate.ts) decides on.
//
// Every member keeps asking, not only the leader: a new leader then already knows its peers,
// including one that went down meanwhile (its last answer stands until it answers again).

import { KCM_PROTOCOL, KCM_VERSION, type Logger } from '@kcm/common';
import { peerProtocols, type ProtocolIdentity } from '@kcm/agent-api';
import { MemberDescriber } from './member-describe';
import { raftAddressOf } from './members';

/** One member's build, as this member last learnt it. */
export interface MemberVersion {
  member: string;
  /** Its kcm protocol; undefined while it has not answered since this member started. */
  protocol: number | undefined;
  /** Its kcm release ('' for a build older than the Member service, or not known yet). */
  kcmVersion: string;
  /** When it last answered (ms), 0 for never; this member itself: now. */
  answeredAtMs: number;
  /** Why the last attempt failed, if it did. */
  lastError?: string;
}

/** What the version gate reads (MemberVersions; a fixed list in unit tests). */
export interface GroupProtocol {
  /** Every member's version as last learnt (no call: for decisions made in line). */
  list(): MemberVersion[];
  /** Asks every member now, then list(). */
  measure(): Promise<MemberVersion[]>;
}

export interface MemberVersionsOptions {
  /** This member's id. */
  self: string;
  /** The group's members now (voters and learners), this one included. */
  members(): readonly string[];
  identity: ProtocolIdentity;
  logger: Logger;
  /** How often a member that answered is asked again (ms); default 2000. One that has not answered yet is asked every 250 ms. */
  intervalMs?: number;
  /** Deadline of one Describe (ms); default 1500. */
  deadlineMs?: number;
}

const UNANSWERED_RETRY_MS = 250;

export class MemberVersions implements GroupProtocol {
  private readonly known = new Map<string, MemberVersion>();
  private readonly describers = new Map<string, MemberDescriber>();
  private timer: NodeJS.Timeout | undefined;
  private refreshing: Promise<void> | undefined;

  constructor(private readonly opts: MemberVersionsOptions) {}

  start(): void {
    if (this.timer) return;
    void this.refresh();
    // Until a member answers, the gate refuses new command kinds for it: ask it again soon.
    this.timer = setInterval(() => void this.refreshDue(), UNANSWERED_RETRY_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    for (const d of this.describers.values()) d.close();
    this.describers.clear();
  }

  /** Asks every member now (one round at a time: a call during a round waits for it). */
  refresh(): Promise<void> {
    this.refreshing ??= this.askAll().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  async measure(): Promise<MemberVersion[]> {
    await this.refresh();
    return this.list();
  }

  /** Every current member's version as last learnt. */
  list(): MemberVersion[] {
    return this.opts.members().map((member) =>
      member === this.opts.self
        ? { member, protocol: KCM_PROTOCOL, kcmVersion: KCM_VERSION, answeredAtMs: Date.now() }
        : this.known.get(member) ?? { member, protocol: undefined, kcmVersion: '', answeredAtMs: 0 },
    );
  }

  /** Asks the members not answered yet, and the others once their interval has passed. */
  private refreshDue(): Promise<void> {
    const answeredBefore = Date.now() - (this.opts.intervalMs ?? 2000);
    const due = (m: string) => {
      const known = this.known.get(m);
      return known?.protocol === undefined || known.answeredAtMs <= answeredBefore;
    };
    this.refreshing ??= this.askAll(due).finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async askAll(due: (member: string) => boolean = () => true): Promise<void> {
    const members = this.opts.members().filter((m) => m !== this.opts.self);
    const current = new Set(members);
    for (const [member, d] of this.describers) {
      if (current.has(member)) continue;
      d.close();
      this.describers.delete(member);
      this.known.delete(member);
    }
    await Promise.all(members.filter(due).map((member) => this.ask(member)));
  }

  private async ask(member: string): Promise<void> {
    let describer = this.describers.get(member);
    if (!describer) {
      describer = new MemberDescriber(raftAddressOf(member), this.opts.identity);
      this.describers.set(member, describer);
    }
    const before = this.known.get(member);
    try {
      const answer = await describer.describe(this.opts.deadlineMs ?? 1500);
      if (before?.protocol !== answer.protocol || before.kcmVersion !== answer.kcmVersion) {
        this.opts.logger.info({ peer: member, protocol: answer.protocol, kcm_version: answer.kcmVersion || 'before 0.2.0' }, 'manager group member runs this kcm build');
      }
      this.known.set(member, { member, protocol: answer.protocol, kcmVersion: answer.kcmVersion, answeredAtMs: Date.now() });
    } catch (err) {
      const why = (err as Error).message;
      // A member refused for its protocol stated it in the refusal (protocol-version.ts).
      const stated = peerProtocols().get(describer.raftAddress);
      if (stated && !stated.accepted) {
        this.known.set(member, { member, protocol: stated.protocol, kcmVersion: stated.kcmVersion, answeredAtMs: stated.seenAtMs, lastError: why });
        return;
      }
      // Otherwise the last answer stands: a member down for its restart is still the build it was.
      this.known.set(member, { ...(before ?? { member, protocol: undefined, kcmVersion: '', answeredAtMs: 0 }), lastError: why });
    }
  }
}

/** How a manager names itself and its peers in the protocol exchange's refusals (protocol-version.ts). */
export function managerProtocolIdentity(member: string, logger: Logger): ProtocolIdentity {
  return { self: () => ({ kind: 'manager', name: member }), peerKind: 'manager', warn: (fields, msg) => logger.warn(fields, msg) };
}
