// Sessions the agent holds on a shard master for the manager's control statements during a
// move (create the target like the source, rename or drop a table, read a position), so the
// manager opens no SQL session itself. A session is one mysql2 connection, named by a random
// id; one the manager forgets (a leader that died) is closed after a minute without a call.

import { randomUUID } from 'node:crypto';
import type mysql from 'mysql2/promise';
import { AgentFailure, stringifyValues, type ShardLogin } from '@kcm/agent-api';
import { jsonArray } from './request-json';
import { addressOf, closeShard, instanceFailure, openShard } from './shard-sql';

export const SESSION_IDLE_MS = 60_000;

interface Session {
  conn: mysql.Connection;
  login: ShardLogin;
  /** Statements run one after another, as on one connection they must. */
  queue: Promise<unknown>;
  /** Statements queued or running: a session busy with a long statement is not idle. */
  busy: number;
  idle: NodeJS.Timeout;
}

export class ShardSessions {
  private readonly sessions = new Map<string, Session>();

  constructor(private readonly idleMs = SESSION_IDLE_MS) {}

  get size(): number {
    return this.sessions.size;
  }

  async open(login: ShardLogin, database: string): Promise<string> {
    const conn = await openShard(login, database);
    const id = randomUUID();
    this.sessions.set(id, { conn, login, queue: Promise.resolve(), busy: 0, idle: this.idleTimer(id) });
    return id;
  }

  /**
   * One statement; SELECTs answer their rows (arrays when `rowsAsArray`), others their
   * result header, as the JSON of values.ts (mysql2's first element, Buffers kept).
   */
  async query(id: string, sql: string, valuesJson: string, rowsAsArray: boolean): Promise<string> {
    const s = this.sessions.get(id);
    if (!s) throw new AgentFailure('not_found', `no session ${id} (closed, or idle for ${this.idleMs / 1000} s)`);
    const values = jsonArray('values_json', valuesJson);
    s.busy++;
    const run = s.queue.catch(() => {}).then(async () => {
      try {
        const [result] = await s.conn.query({ sql, values, rowsAsArray });
        // A ResultSetHeader is a class instance: its own fields, as a plain object.
        return stringifyValues(Array.isArray(result) ? result : { ...result });
      } catch (err) {
        throw instanceFailure(`MariaDB at ${addressOf(s.login)}`, err);
      } finally {
        s.busy--;
        this.touch(id, s);
      }
    });
    s.queue = run;
    return run;
  }

  async close(id: string): Promise<boolean> {
    const s = this.sessions.get(id);
    if (!s) return false;
    this.sessions.delete(id);
    clearTimeout(s.idle);
    await s.queue.catch(() => {});
    await closeShard(s.conn);
    return true;
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.sessions.keys()].map((id) => this.close(id)));
  }

  private touch(id: string, s: Session): void {
    clearTimeout(s.idle);
    s.idle = this.idleTimer(id);
  }

  private idleTimer(id: string): NodeJS.Timeout {
    const t = setTimeout(() => {
      const s = this.sessions.get(id);
      if (s && s.busy > 0) this.touch(id, s);
      else void this.close(id);
    }, this.idleMs);
    t.unref();
    return t;
  }
}
