// The service's state without an engine: sessions by id, catch-ups by move, copies by move.
// What they do on real mariadbd is in services/agent/test/mariadb/shard-data-agent.test.ts.

import { describe, expect, it } from 'vitest';
import { AgentFailure, type CopyRowsRequest } from '@kcm/agent-api';
import { createLogger } from '@kcm/common';
import { ShardSessions } from '../../src/capabilities/shard-data/sessions';
import { CatchUps } from '../../src/capabilities/shard-data/catch-ups';
import { CopyRuns } from '../../src/capabilities/shard-data/copy-runs';

const nowhere = { host: '127.0.0.1', port: 1, user: 'u', password: 'p' };
const kindOf = (err: unknown) => (err instanceof AgentFailure ? err.kind : err);

describe('sessions held for the manager', () => {
  it('a statement in a session that is not held is not_found', async () => {
    const sessions = new ShardSessions();
    await expect(sessions.query('no-such-session', 'SELECT 1', '', false).catch(kindOf)).resolves.toBe('not_found');
    expect(await sessions.close('no-such-session')).toBe(false);
  });

  it('a session that cannot be opened is instance_failed naming the instance', async () => {
    const err = await new ShardSessions().open(nowhere, '').catch((e: unknown) => e);
    expect(kindOf(err)).toBe('instance_failed');
    expect((err as Error).message).toMatch(/^MariaDB at 127\.0\.0\.1:1 did not accept a session/);
  });
});

describe('catch-ups by move', () => {
  const catchUps = new CatchUps(createLogger({ name: 'test', level: 'silent' }));

  it('a wait, a tail or a position for a move with no catch-up here is not_found', async () => {
    await expect(catchUps.to({ move_id: 'm', at: { file: '', pos: 0 }, timeout_ms: 10 }).catch(kindOf)).resolves.toBe('not_found');
    await expect(catchUps.tail({ move_id: 'm', at: { file: 'b.000001', pos: 4 }, timeout_ms: 10 }).catch(kindOf)).resolves.toBe('not_found');
    await expect(catchUps.sourcePosition('m').catch(kindOf)).resolves.toBe('not_found');
  });

  it('halting or stopping a move with no catch-up here answers not running (a stop is repeated safely)', async () => {
    expect((await catchUps.halt('m')).running).toBe(false);
    expect((await catchUps.stop('m')).running).toBe(false);
  });

  it('a start without a position or a key is refused before anything runs', async () => {
    const table = { login: nowhere, db: 'd', table: 't' };
    const start = { move_id: 'm', binlog_login: nowhere, source: table, target: table, shape: { columns: ['id'], text: [], key: [{ name: 'id', ordinal: 1 }] }, start: { file: '', pos: 4 } };
    await expect(catchUps.start(start).catch(kindOf)).resolves.toBe('invalid_argument');
    await expect(catchUps.start({ ...start, start: { file: 'b.000001', pos: 4 }, shape: { columns: ['id'], text: [], key: [] } }).catch(kindOf)).resolves.toBe('invalid_argument');
    expect(catchUps.moves).toEqual([]);
  });
});

describe('copies by move', () => {
  const table = { login: nowhere, db: 'd', table: 't' };
  const request: CopyRowsRequest = {
    move_id: 'm', source: table, target: table, shape: { columns: ['id'], text: [], key: [{ name: 'id', ordinal: 1 }] },
    chunk_rows: 100, commit_rows: 0, commit_bytes: 0, commit_ms: 0, rows_per_second: 0, max_target_lag_trx: 0, target_standbys: [], from_start: false, resume_after_json: '',
  };

  it('a copy without chunk rows is refused', async () => {
    await expect(new CopyRuns().run({ ...request, chunk_rows: 0 }, new AbortController().signal, () => {}).catch(kindOf)).resolves.toBe('invalid_argument');
  });

  it('a copy whose source cannot be reached fails naming it, and is no longer running', async () => {
    const copies = new CopyRuns();
    const err = await copies.run(request, new AbortController().signal, () => {}).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/MariaDB at 127\.0\.0\.1:1 did not accept a session/);
    expect(copies.moves).toEqual([]);
  });
});
