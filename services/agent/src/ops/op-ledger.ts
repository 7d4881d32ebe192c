// Idempotence by op_id: the first call of an operation runs it; a concurrent or later
// call with the same op_id (a manager retrying after a crash or a lost reply) gets the
// first call's outcome instead of a second effect. Finished outcomes are kept on disk, so
// this also holds across an agent restart. Failed operations are forgotten: a retry runs again.

import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { AgentFailure } from '@kcm/agent-api';

/** How long a finished outcome is kept: far longer than any manager retries an operation. */
export const DEFAULT_RETENTION_MS = 7 * 24 * 3600_000;

const OP_ID = /^[A-Za-z0-9_.:-]{1,200}$/;

export class OpLedger {
  private readonly inFlight = new Map<string, Promise<unknown>>();

  private readonly pruneTimer: NodeJS.Timeout;

  constructor(private readonly dir: string, private readonly retentionMs = DEFAULT_RETENTION_MS) {
    mkdirSync(dir, { recursive: true });
    void this.prune();
    this.pruneTimer = setInterval(() => void this.prune(), Math.min(3600_000, retentionMs)).unref();
  }

  /** Forgets outcomes older than the retention period. */
  async prune(now = Date.now()): Promise<number> {
    let removed = 0;
    for (const name of await readdir(this.dir).catch(() => [] as string[])) {
      const file = path.join(this.dir, name);
      const st = await stat(file).catch(() => undefined);
      if (st && now - st.mtimeMs > this.retentionMs) {
        await rm(file, { force: true });
        removed++;
      }
    }
    return removed;
  }

  close(): void {
    clearInterval(this.pruneTimer);
  }

  async run<T>(opId: string, operation: () => Promise<T>): Promise<T> {
    if (!OP_ID.test(opId)) throw new AgentFailure('invalid_argument', `op_id ${JSON.stringify(opId)} must be 1-200 characters of [A-Za-z0-9_.:-]`);
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
