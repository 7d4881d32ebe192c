import { describe, expect, it } from 'vitest';
import { chooseBackupSource, NoBackupSourceError, type ProbedSource } from '../../src/capabilities/mariadb/backup/choose-source';
import type { MariaDbProbeReply } from '@kcm/agent-api';

const healthy: MariaDbProbeReply = {
  port: 1, state: 'online', pid: 10, reason: '', is_replica: true, io_running: true, sql_running: true, seconds_behind_master: 0,
  last_error: '', gtid_current_pos: '0-1-5', read_only: true, semi_sync_master: false, semi_sync_master_clients: 0, master_host: 'm', master_port: 1,
  supervisor_restarts: 0, desired_state: 'running',
};
const master: ProbedSource = {
  source: { agent_address: 'h1:58100', hostaddr: 'h1', port: 3001, is_master: true },
  probe: { ...healthy, is_replica: false, io_running: false, sql_running: false, seconds_behind_master: -1, read_only: false },
};
const standby = (host: string, probe: Partial<MariaDbProbeReply> | undefined): ProbedSource => ({
  source: { agent_address: `${host}:58100`, hostaddr: host, port: 3001, is_master: false },
  probe: probe && { ...healthy, ...probe },
});
const policy = { allowReplicaDelayS: 10, allowPullFromMaster: false };

describe('choosing the source of a rebuild copy', () => {
  it('takes the first healthy standby, even when the master is listed first', () => {
    expect(chooseBackupSource([master, standby('h2', {}), standby('h3', {})], policy).hostaddr).toBe('h2');
  });

  it('skips a standby that lags more than allow_replica_delay', () => {
    expect(chooseBackupSource([standby('h2', { seconds_behind_master: 11 }), standby('h3', { seconds_behind_master: 10 })], policy).hostaddr).toBe('h3');
  });

  it('skips standbys that are offline, not replicating, broken or unreachable', () => {
    const bad = [
      standby('a', { state: 'offline' }),
      standby('b', { is_replica: false }),
      standby('c', { sql_running: false }),
      standby('d', { seconds_behind_master: -1 }),
      standby('e', undefined),
    ];
    expect(() => chooseBackupSource(bad, policy)).toThrow(NoBackupSourceError);
  });

  it('falls back to the master only when allow_pull_from_master', () => {
    const candidates = [standby('h2', { io_running: false }), master];
    expect(() => chooseBackupSource(candidates, policy)).toThrow(/allow_pull_from_master is off/);
    expect(chooseBackupSource(candidates, { ...policy, allowPullFromMaster: true }).hostaddr).toBe('h1');
  });

  it('names every rejected candidate and why', () => {
    try {
      chooseBackupSource([standby('h2', { seconds_behind_master: 99 }), { ...master, probe: undefined }], { ...policy, allowPullFromMaster: true });
      expect.unreachable();
    } catch (err) {
      expect((err as NoBackupSourceError).reasons).toEqual(['standby h2:3001: it is 99 s behind (allowed 10 s)', 'master h1:3001: it is unreachable']);
    }
  });
});
