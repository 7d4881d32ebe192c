// A follower's Submit sessions (submit-session.ts), one per leader address. When
// leadership moves, the session to the old leader stays until its last submission is
// answered (the old leader may still have committed it), then closes.

import type { SubmitReply, SubmitRequest } from './forward-proto';
import { SubmitSession } from './submit-session';

export class LeaderLink {
  private readonly sessions = new Map<string, SubmitSession>();

  submit(address: string, request: Omit<SubmitRequest, 'id'>, timeoutMs: number): Promise<SubmitReply> {
    let session = this.sessions.get(address);
    if (!session) {
      this.retireIdle();
      session = new SubmitSession(address);
      this.sessions.set(address, session);
    }
    return session.submit(request, timeoutMs);
  }

  close(): void {
    for (const session of this.sessions.values()) session.close();
    this.sessions.clear();
  }

  /** Closes sessions with nothing in flight (to leaders of the past, in practice). */
  private retireIdle(): void {
    for (const [address, session] of this.sessions) {
      if (session.inFlight > 0) continue;
      session.close();
      this.sessions.delete(address);
    }
  }
}
