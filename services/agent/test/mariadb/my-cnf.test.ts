import { describe, expect, it } from 'vitest';
import { instanceLayout } from '../../src/capabilities/mariadb/instance/instance-layout';
import { renderMyCnf, renderRoleCnf } from '../../src/capabilities/mariadb/instance/my-cnf';
import type { MariaDbInstanceSpec } from '@kcm/agent-api';

const spec: MariaDbInstanceSpec = {
  port: 57001, datadir: '/data/db', logdir: '/data/log', wal_log_dir: '/wal', server_id: 7,
  innodb_size_mb: 1024, max_connections: 2000, dbcfg: 0, fullsync_level: 1,
};

/** my.cnf as a map of `key = value` lines of the [mysqld] group. */
function settings(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^(\w+) = (.*)$/.exec(line);
    if (m) out.set(m[1], m[2]);
  }
  return out;
}

describe('my.cnf generated from a shard job paras', () => {
  const layout = instanceLayout(spec);
  const cnf = settings(renderMyCnf(spec, layout, '127.0.2.1'));

  it('sizes the buffer pool from innodb_size and takes max_connections and server id', () => {
    expect(cnf.get('innodb_buffer_pool_size')).toBe('1024M');
    expect(cnf.get('max_connections')).toBe('2000');
    expect(cnf.get('server_id')).toBe('7');
  });

  it('puts data under <datadir>/<port>, logs under logdir and binlog and redo under wal_log_dir', () => {
    expect(cnf.get('datadir')).toBe('/data/db/57001/data');
    expect(cnf.get('socket')).toBe('/data/db/57001/run/mariadbd.sock');
    expect(cnf.get('pid_file')).toBe('/data/db/57001/run/mariadbd.pid');
    expect(cnf.get('tmpdir')).toBe('/data/db/57001/tmp');
    expect(cnf.get('log_error')).toBe('/data/log/57001/error.log');
    expect(cnf.get('log_bin')).toBe('/wal/57001/binlog/mariadb-bin');
    expect(cnf.get('innodb_log_group_home_dir')).toBe('/wal/57001/redo');
  });

  it('binds the host address and replicates by GTID with a row binlog', () => {
    expect(cnf.get('bind_address')).toBe('127.0.2.1');
    expect(cnf.get('port')).toBe('57001');
    expect(cnf.get('binlog_format')).toBe('ROW');
    expect(cnf.get('gtid_strict_mode')).toBe('ON');
    expect(cnf.get('log_slave_updates')).toBe('ON');
    expect(cnf.get('rpl_semi_sync_master_wait_point')).toBe('AFTER_SYNC');
  });

  it('dbcfg 1 selects small-memory settings without touching the requested buffer pool', () => {
    const small = settings(renderMyCnf({ ...spec, dbcfg: 1 }, layout, '127.0.2.1'));
    expect(small.get('performance_schema')).toBe('OFF');
    expect(small.get('innodb_log_file_size')).toBe('48M');
    expect(cnf.get('innodb_log_file_size')).toBe('1G');
    expect(small.get('innodb_buffer_pool_size')).toBe('1024M');
  });

  it('includes the role file last, so the role decides semi-sync and read_only', () => {
    const text = renderMyCnf(spec, layout, '127.0.2.1');
    expect(text.trimEnd().split('\n').at(-1)).toBe('!include /data/db/57001/kcm-role.cnf');
    expect(cnf.has('rpl_semi_sync_master_enabled')).toBe(false);
  });
});

describe('role settings', () => {
  it('enable the semi-sync master side only on the master', () => {
    expect(settings(renderRoleCnf('master', 1))).toEqual(new Map([['rpl_semi_sync_master_enabled', 'ON'], ['rpl_semi_sync_slave_enabled', 'OFF'], ['read_only', 'OFF']]));
    expect(settings(renderRoleCnf('standby', 1))).toEqual(new Map([['rpl_semi_sync_master_enabled', 'OFF'], ['rpl_semi_sync_slave_enabled', 'ON'], ['read_only', 'ON']]));
  });

  it('fullsync_level 0 turns semi-sync off on both sides', () => {
    for (const role of ['master', 'standby'] as const) {
      const s = settings(renderRoleCnf(role, 0));
      expect([s.get('rpl_semi_sync_master_enabled'), s.get('rpl_semi_sync_slave_enabled')]).toEqual(['OFF', 'OFF']);
    }
  });
});
