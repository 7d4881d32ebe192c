// Leader-only services switched on and off in one place. Only the leader runs jobs and
// health checks; a member that loses leadership stops them before anything else happens,
// and the next leader starts them again (resuming every unfinished job).

import type { Logger } from '@kcm/common';

export interface LeaderService {
  name: string;
  start(): void;
  stop(): Promise<void> | void;
}

export class Leadership {
  private leading = false;
  /** Serialises transitions so a quick lose/win never overlaps a stop with a start. */
  private transition: Promise<void> = Promise.resolve();

  constructor(private readonly services: LeaderService[], private readonly logger: Logger) {}

  get isLeader(): boolean {
    return this.leading;
  }

  /** Call on every leadership change observed from Raft. */
  update(isLeader: boolean, term: number): Promise<void> {
    this.transition = this.transition.then(async () => {
      if (isLeader === this.leading) return;
      this.leading = isLeader;
      if (isLeader) await this.establish(term);
      else await this.revoke(term);
    });
    return this.transition;
  }

  private async establish(term: number): Promise<void> {
    this.logger.info({ term }, 'leadership established: starting leader services');
    for (const s of this.services) s.start();
  }

  private async revoke(term: number): Promise<void> {
    this.logger.info({ term }, 'leadership revoked: stopping leader services');
    for (const s of [...this.services].reverse()) {
      try {
        await s.stop();
      } catch (err) {
        this.logger.error({ err, service: s.name }, 'leader service failed to stop');
      }
    }
  }
}
