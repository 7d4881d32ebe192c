// Idempotence by op_id: the first call of an operation runs it; a concurrent or later
// call with the same op_id (a manager retrying after a crash or a lost reply) gets the
// first call's outcome instead of a second effect. Finished outcomes are kept on disk, so
// this also holds across an agent restart. Failed operations are forgotten: a retry runs again.

import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const OP_ID = /^[A-Za-z0-9_.:-]{1,200}$/;

export class OpLedger {
  private readonly inFlight = new Map<string, Promise<unknown>>();

  constructor(private readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }

  async run<T>(opId: string, operation: () => Promise<T>): Promise<T> {
    if (!OP_ID.test(opId)) throw new Error(`op_id ${JSON.stringify(opId)} must be 1-200 characters of [A-Za-z0-9_.:-]`);
    const running = this.inFlight.get(opId);
    if (running) return running as Promise<T>;
    const done = this.finished<T>(opId);
    if (done !== undefined) return done;
    const p = operation().then((result) => {
      this.record(opId, result);
      return result;
    });
    this.inFlight.set(opId, p);
    try {
      return await p;
    } finally {
      this.inFlight.delete(opId);
    }
  }

  private file(opId: string): string {
    return path.join(this.dir, `${opId.replaceAll(':', '_')}.json`);
  }

  private finished<T>(opId: string): T | undefined {
    try {
      return (JSON.parse(readFileSync(this.file(opId), 'utf8')) as { result: T }).result;
    } catch {
      return undefined;
    }
  }

  private record(opId: string, result: unknown): void {
    const tmp = `${this.file(opId)}.tmp`;
    writeFileSync(tmp, JSON.stringify({ result }), { mode: 0o600 });
    renameSync(tmp, this.file(opId));
  }
}
