// What the agent was told each of its database instances should be doing, on disk, so an
// agent restarted (or a host rebooted) knows what to bring back. The agent knows nothing of
// clusters: an instance is wanted running once it was installed or started, stopped only
// by an explicit Stop, and forgotten by Remove.
//
//   <stateDir>/desired/<kind>-<port>.json   {kind, port, desired, restarts, lastRestartAt}

import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

export type SupervisedKind = 'mariadb' | 'postgres';
export type DesiredState = 'running' | 'stopped';

export interface DesiredRecord {
  kind: SupervisedKind;
  port: number;
  desired: DesiredState;
  /** Restarts the supervisor made after the instance was found down (kept across agent restarts). */
  restarts: number;
  lastRestartAt: string | null;
}

const FILE_NAME = /^(mariadb|postgres)-([0-9]{1,5})\.json$/;

function checkKind(kind: string): SupervisedKind {
  if (kind !== 'mariadb' && kind !== 'postgres') throw new Error(`instance kind must be mariadb or postgres, not ${JSON.stringify(kind)}`);
  return kind;
}

function checkPort(port: number): number {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`port ${port} is not a TCP port`);
  return port;
}

export class DesiredStates {
  constructor(private readonly dir: string) {}

  private file(kind: SupervisedKind, port: number): string {
    return path.join(this.dir, `${checkKind(kind)}-${checkPort(port)}.json`);
  }

  async get(kind: SupervisedKind, port: number): Promise<DesiredRecord | undefined> {
    try {
      return parseRecord(await readFile(this.file(kind, port), 'utf8'));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  /** Sets the desired state, keeping the restart count. */
  async set(kind: SupervisedKind, port: number, desired: DesiredState): Promise<DesiredRecord> {
    const before = await this.get(kind, port).catch(() => undefined);
    const record: DesiredRecord = { kind, port, desired, restarts: before?.restarts ?? 0, lastRestartAt: before?.lastRestartAt ?? null };
    await this.write(record);
    return record;
  }

  /** Counts one supervisor restart; a record dropped meanwhile (Remove) stays dropped. */
  async noteRestart(kind: SupervisedKind, port: number, at: Date): Promise<DesiredRecord | undefined> {
    const before = await this.get(kind, port);
    if (!before) return undefined;
    const record = { ...before, restarts: before.restarts + 1, lastRestartAt: at.toISOString() };
    await this.write(record);
    return record;
  }

  async drop(kind: SupervisedKind, port: number): Promise<void> {
    await rm(this.file(kind, port), { force: true });
  }

  /** Every record; a half-written or foreign file is skipped, never guessed at. */
  async list(): Promise<DesiredRecord[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    const records: DesiredRecord[] = [];
    for (const name of names.filter((n) => FILE_NAME.test(n)).sort()) {
      try {
        records.push(parseRecord(await readFile(path.join(this.dir, name), 'utf8')));
      } catch {
        // removed meanwhile, or not ours
      }
    }
    return records;
  }

  private async write(record: DesiredRecord): Promise<void> {
    const file = this.file(record.kind, record.port);
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await writeFile(`${file}.tmp`, JSON.stringify(record), { mode: 0o600 });
    await rename(`${file}.tmp`, file);
  }
}

function parseRecord(text: string): DesiredRecord {
  const raw = JSON.parse(text) as Partial<DesiredRecord>;
  const desired = raw.desired === 'stopped' ? 'stopped' : raw.desired === 'running' ? 'running' : undefined;
  if (!desired) throw new Error(`desired state ${JSON.stringify(raw.desired)} is not running or stopped`);
  return {
    kind: checkKind(String(raw.kind)),
    port: checkPort(Number(raw.port)),
    desired,
    restarts: Number.isInteger(raw.restarts) ? Number(raw.restarts) : 0,
    lastRestartAt: typeof raw.lastRestartAt === 'string' ? raw.lastRestartAt : null,
  };
}
