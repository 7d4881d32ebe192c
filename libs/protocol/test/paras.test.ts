import { describe, expect, it } from 'vitest';
import { describeJob, parseRequest, validateParas, type AnyValidRequest } from '../src/index';
import { loadFixture, type Envelope } from './fixtures';

function accept(body: Envelope): AnyValidRequest {
  const result = parseRequest(body);
  if (!result.ok) throw result.error;
  return result.request;
}

describe('validated paras are what jobs consume', () => {
  it('carry counts and ports as numbers, ids and names as the strings sent', () => {
    const request = accept(loadFixture('create_cluster'));
    if (request.jobType !== 'create_cluster') throw new Error('narrowing');
    expect(request.paras).toMatchObject({ shards: 1, nodes: 3, comps: 1, fullsync_level: 1, innodb_size: 1024, nick_name: 'my_nick_name' });
    const nodes = accept(loadFixture('delete_nodes'));
    expect(nodes.paras).toEqual({ cluster_id: '1', shard_id: '1', hostaddr: '127.0.2.2', port: 57003 });
  });

  it('fill defaults for absent optional paras: dbcfg and install_proxysql "0", flags false', () => {
    const cluster = loadFixture('create_cluster');
    delete cluster.paras.dbcfg;
    delete cluster.paras.install_proxysql;
    expect(accept(cluster).paras).toMatchObject({ dbcfg: '0', install_proxysql: '0' });
    const rebuild = loadFixture('rebuild_node');
    delete rebuild.paras.allow_pull_from_master;
    rebuild.paras.rb_nodes = [{ hostaddr: '127.0.2.2', port: '57003' }];
    expect(accept(rebuild).paras).toMatchObject({ allow_pull_from_master: false, rb_nodes: [{ need_backup: false }] });
    const expand = loadFixture('expand_cluster');
    delete expand.paras.drop_old_table;
    expect(accept(expand).paras).toMatchObject({ drop_old_table: false });
  });

  it.each([
    ['0', false],
    ['1', true],
    ['false', false],
    ['true', true],
  ])('read flag "%s" as %s', (sent, expected) => {
    const body = loadFixture('expand_cluster');
    body.paras.drop_old_table = sent;
    expect(accept(body).paras).toMatchObject({ drop_old_table: expected });
  });

  it('allow empty storage/computer iplists (kcm then chooses running machines)', () => {
    const body = loadFixture('create_cluster');
    body.paras.storage_iplists = [];
    body.paras.computer_iplists = [];
    expect(parseRequest(body).ok).toBe(true);
  });

  it('read a missing storage/computer iplist in create_cluster as empty: the spec text says machines are then chosen', () => {
    const body = loadFixture('create_cluster');
    delete body.paras.storage_iplists;
    delete body.paras.computer_iplists;
    expect(accept(body).paras).toMatchObject({ storage_iplists: [], computer_iplists: [] });
  });

  it('accept IPv6 machine addresses', () => {
    const body = loadFixture('create_machine');
    body.paras.hostaddr = 'fd00::12';
    expect(accept(body).paras).toMatchObject({ hostaddr: 'fd00::12' });
  });

  it('accept fullsync_level up to nodes - 1 and reject it above', () => {
    const body = loadFixture('create_cluster');
    body.paras.nodes = '5';
    body.paras.fullsync_level = '4';
    expect(parseRequest(body).ok).toBe(true);
    body.paras.fullsync_level = '5';
    expect(parseRequest(body).ok).toBe(false);
  });

  it('accept cluster_id -1 (the metadata) only in manual_backup_cluster', () => {
    const backup = loadFixture('manual_backup_cluster');
    backup.paras.cluster_id = '-1';
    expect(accept(backup).paras).toEqual({ cluster_id: '-1' });
    for (const jobType of ['delete_cluster', 'add_comps', 'logical_backup', 'get_expand_table_list'] as const) {
      const body = loadFixture(jobType);
      body.paras.cluster_id = '-1';
      expect(parseRequest(body).ok, jobType).toBe(false);
    }
  });

  it('normalise the older logical_restore form (db_table + restore_time in paras) into restore[]', () => {
    const body = loadFixture('logical_restore');
    delete body.paras.restore;
    body.paras.db_table = 'postgres_$$_public.t1';
    body.paras.restore_time = '1700000000';
    expect(accept(body).paras).toEqual({
      src_cluster_id: '1',
      dst_cluster_id: '2',
      restore_type: 'table',
      restore: [{ db_table: 'postgres_$$_public.t1', restore_time: '1700000000' }],
    });
  });

  it('refuse both logical_restore forms at once', () => {
    const body = loadFixture('logical_restore');
    body.paras.db_table = 'postgres_$$_public.t1';
    const result = parseRequest(body);
    expect(!result.ok && result.error.field).toBe('paras.db_table');
  });

  it('require target_leader only for transfer_leader and peer for add_peer/remove_peer', () => {
    const add = loadFixture('raft_mission');
    add.paras = { task_type: 'add_peer', peer: '[::1]:58001' };
    expect(parseRequest(add).ok).toBe(true);
    add.paras = { task_type: 'remove_peer', peer: 'manager-2.example:58001' };
    expect(parseRequest(add).ok).toBe(true);
    add.paras = { task_type: 'remove_peer', target_leader: '127.0.1.2:58001' };
    const result = parseRequest(add);
    expect(!result.ok && result.error.message).toBe('paras.peer: is required when task_type is remove_peer');
  });

  it('find get_cluster_detail by cluster_id instead of cluster_name', () => {
    const body = loadFixture('get_cluster_detail');
    body.paras = { cluster_id: '3' };
    expect(accept(body).paras).toEqual({ cluster_id: '3' });
  });

  it('name the cluster of delete_cluster by cluster_name instead of cluster_id, as get_cluster_detail does', () => {
    const body = loadFixture('delete_cluster');
    body.paras = { cluster_name: 'cluster_1700000000_000001' };
    expect(accept(body).paras).toEqual({ cluster_name: 'cluster_1700000000_000001' });
    body.paras = {};
    const missing = parseRequest(body);
    expect(!missing.ok && [missing.error.field, missing.error.message]).toEqual(['paras.cluster_id', 'paras.cluster_id: is required (or paras.cluster_name)']);
    expect(describeJob('delete_cluster').paras.map((p) => p.name)).toEqual(['cluster_id', 'cluster_name']);
  });

  it('are rejected by validateParas when paras is not an object', () => {
    const result = validateParas('delete_cluster', ['1']);
    expect(!result.ok && [result.error.errorName, result.error.field]).toEqual(['INVALID_PARAS', 'paras']);
  });
});

describe('unicode in names', () => {
  it('keeps a Unicode nick_name exactly as sent', () => {
    const body = loadFixture('create_cluster');
    body.paras.nick_name = '订单库 🚀 Ünïcødé';
    expect(accept(body).paras).toMatchObject({ nick_name: '订单库 🚀 Ünïcødé' });
  });

  it('counts nick_name length in characters, not UTF-16 units', () => {
    const body = loadFixture('create_cluster');
    body.paras.nick_name = '🚀'.repeat(64);
    expect(parseRequest(body).ok).toBe(true);
    body.paras.nick_name = '🚀'.repeat(65);
    const result = parseRequest(body);
    expect(!result.ok && result.error.message).toContain('paras.nick_name: must be at most 64 characters');
  });

  it('rejects a lone surrogate with a clear rule instead of crashing', () => {
    const body = JSON.parse(JSON.stringify(loadFixture('create_cluster')).replace('my_nick_name', 'bad\\ud800name')) as Envelope;
    const result = parseRequest(body);
    expect(!result.ok && result.error.message).toBe('paras.nick_name: must be well-formed Unicode (no lone surrogates), got "bad\\ud800name"');
  });

  it('rejects blank and control-character names', () => {
    for (const nick_name of ['   ', 'tab\there', 'nul\u0000']) {
      const body = loadFixture('create_cluster');
      body.paras.nick_name = nick_name;
      const result = parseRequest(body);
      expect(!result.ok && result.error.field, JSON.stringify(nick_name)).toBe('paras.nick_name');
    }
  });

  it('keeps SQL identifiers ASCII and says so', () => {
    const body = loadFixture('get_variable');
    body.paras.variable = 'größe';
    const result = parseRequest(body);
    expect(!result.ok && result.error.message).toBe(
      'paras.variable: must be an ASCII SQL identifier: a letter or _ then letters, digits or _, at most 64 characters, got "größe"',
    );
  });
});
