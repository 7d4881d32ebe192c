/**
 * Invalid variants of every fixture: for each job type at least (a) a missing required
 * field, (b) a wrong JSON type or enum value, (c) a broken format or cross-field rule.
 * Each names the field the error must name.
 */
import type { ErrorName, JobType } from '../src/index';
import type { Envelope } from './fixtures';

export type VariantKind = 'missing' | 'type' | 'format';

export interface Variant {
  kind: VariantKind;
  /** What is wrong, for the test name. */
  what: string;
  /** Field path the error message must name, e.g. `paras.nodes` or `job_id`. */
  field: string;
  code: ErrorName;
  mutate: (body: Envelope) => void;
}

/** Sets (or, with `undefined`, deletes) a value at a dotted path inside paras; `[n]` indexes arrays. */
function setIn(paras: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split(/\.|\[(\d+)\]/).filter((k) => k !== undefined && k !== '');
  let node = paras as Record<string, unknown>;
  for (const key of keys.slice(0, -1)) node = node[key] as Record<string, unknown>;
  const last = keys[keys.length - 1];
  if (value === undefined) delete node[last];
  else node[last] = value;
}

const fieldName = (path: string) => `paras.${path}`;

const missing = (path: string): Variant => ({
  kind: 'missing', what: `without ${path}`, field: fieldName(path), code: 'INVALID_PARAS',
  mutate: (b) => setIn(b.paras, path, undefined),
});

const wrongType = (path: string, value: unknown): Variant => ({
  kind: 'type', what: `${path} = ${JSON.stringify(value)}`, field: fieldName(path), code: 'INVALID_PARAS',
  mutate: (b) => setIn(b.paras, path, value),
});

/** A value of the right JSON type that breaks a format, range or cross-field rule. */
const broken = (path: string, value: unknown, why: string, extra: Record<string, unknown> = {}): Variant => ({
  kind: 'format', what: `${path} = ${JSON.stringify(value)} (${why})`, field: fieldName(path), code: 'INVALID_PARAS',
  mutate: (b) => {
    for (const [k, v] of Object.entries(extra)) setIn(b.paras, k, v);
    setIn(b.paras, path, value);
  },
});

/** Envelope-level variants, for jobs whose paras are empty. */
const envelope = (kind: VariantKind, what: string, field: string, mutate: (b: Envelope) => void): Variant => ({
  kind, what, field, code: 'BAD_ENVELOPE', mutate,
});

const NO_PARAS_VARIANTS: Variant[] = [
  envelope('missing', 'without timestamp', 'timestamp', (b) => delete b.timestamp),
  envelope('type', 'paras is an array', 'paras', (b) => ((b as Record<string, unknown>).paras = [])),
  envelope('type', 'version is a number', 'version', (b) => (b.version = 1)),
  envelope('format', 'version "2.0"', 'version', (b) => (b.version = '2.0')),
  envelope('format', 'timestamp "yesterday"', 'timestamp', (b) => (b.timestamp = 'yesterday')),
];

export const INVALID_VARIANTS: Record<JobType, Variant[]> = {
  get_status: [
    envelope('missing', 'without job_id', 'job_id', (b) => delete b.job_id),
    envelope('type', 'job_id is a number', 'job_id', (b) => (b.job_id = 42)),
    envelope('format', 'job_id empty', 'job_id', (b) => (b.job_id = '')),
    envelope('format', 'timestamp negative', 'timestamp', (b) => (b.timestamp = '-5')),
  ],
  create_machine: [
    missing('hostaddr'), missing('comp_datadir'), missing('total_mem'),
    wrongType('machine_type', 'both'), wrongType('total_cpu_cores', 8), wrongType('datadir', ['/data']),
    broken('hostaddr', '300.1.1.1', 'not an IP'), broken('port_range', '58000-57000', 'low > high'),
    broken('port_range', '80-9000', 'below 1024'), broken('port_range', '57000', 'no high'),
    broken('datadir', 'relative/dir', 'not absolute'), broken('logdir', '/a/../etc', 'dot-dot segment'),
    broken('total_mem', '1.5', 'fraction'), broken('total_cpu_cores', '0', 'zero cores'),
  ],
  delete_machine: [missing('machine_type'), wrongType('machine_type', 'server'), broken('hostaddr', 'localhost', 'a name, not an IP')],
  set_machine: [missing('node_stats'), wrongType('node_stats', 'offline'), broken('hostaddr', '127.0.0', 'three octets')],
  create_cluster: [
    missing('nick_name'), missing('fullsync_level'), missing('rocksdb_block_cache_size_M'),
    wrongType('ha_mode', 'galera'), wrongType('cpu_limit_node', 'hard'), wrongType('storage_iplists', '127.0.2.1'),
    wrongType('dbcfg', '2'), wrongType('install_proxysql', 'yes'), wrongType('nodes', 3),
    broken('nodes', '2', 'fewer than 3 nodes'), broken('shards', '0', 'no shards'), broken('comps', '0', 'no compute nodes'),
    broken('shards', 'abc', 'not a number'), broken('max_connections', '', 'empty'), broken('innodb_size', '1.5', 'fraction'),
    broken('cpu_cores', '-2', 'negative'), broken('fullsync_level', '3', 'more than nodes - 1'),
    broken('computer_iplists[0]', 'not-an-ip', 'not an IP'), broken('nick_name', '\u0007bell', 'control character'),
    broken('shards', '2', 'proxy needs one shard', { install_proxysql: '1' }),
  ],
  delete_cluster: [
    missing('cluster_id'), wrongType('cluster_id', 1), broken('cluster_id', '-1', '-1 only for manual_backup_cluster'),
    broken('cluster_name', 'drop table;', 'unsafe characters', { cluster_id: undefined }),
  ],
  add_shards: [
    missing('storage_iplists'), wrongType('shards', ['1']), broken('nodes', '1', 'fewer than 3 nodes'), broken('shards', '0', 'zero shards'),
  ],
  delete_shards: [missing('shard_id'), wrongType('shard_id', null), broken('shard_id', '01', 'leading zero')],
  add_comps: [missing('comps'), wrongType('computer_iplists', {}), broken('comps', '0', 'zero comps')],
  delete_comp: [missing('comp_id'), wrongType('comp_id', true), broken('comp_id', 'comp_1', 'a name, not an id')],
  add_nodes: [
    missing('nodes'), wrongType('storage_iplists[0]', 1), broken('nodes', '0', 'zero nodes'), broken('shard_id', '0', 'id 0'),
  ],
  delete_nodes: [missing('port'), wrongType('hostaddr', 2130706433), broken('port', '70000', 'port above 65535'), broken('port', '0', 'port 0')],
  rebuild_node: [
    missing('rb_nodes'), missing('rb_nodes[0].port'),
    wrongType('rb_nodes', { hostaddr: '127.0.2.2' }), wrongType('rb_nodes[0].need_backup', 'maybe'),
    broken('rb_nodes', [], 'empty list'), broken('rb_nodes[0].hostaddr', '127.0.2', 'not an IP'),
    broken('allow_replica_delay', '-1', 'negative delay'), broken('rb_nodes[0].pv_limit', 'fast', 'not a number'),
    broken('allow_pull_from_master', 'yes', 'not a flag'),
  ],
  update_instance_cgroup: [
    missing('cgroup_mode'), missing('ip'), wrongType('type', 'mariadb'), wrongType('cgroup_mode', 'hard'),
    broken('ip', '::g', 'bad IPv6'), broken('cpu_cores', '0', 'zero cores'), broken('port', '3306.0', 'fraction'),
  ],
  manual_backup_cluster: [missing('cluster_id'), wrongType('cluster_id', -1), broken('cluster_id', '-2', 'only -1 is special')],
  cluster_restore: [
    missing('restore_time'), wrongType('restore_time', 1700000000),
    broken('restore_time', '2024-02-30 10:00:00', 'not a real date'), broken('restore_time', '2024-03-01T10:00:00', 'ISO T separator'),
    broken('restore_time', '2024-03-01 24:00:00', 'hour 24'), broken('dst_cluster_id', '1', 'same as source'),
  ],
  logical_backup: [
    missing('backup'), missing('backup[0].backup_time'), wrongType('backup_type', 'tables'), wrongType('backup', 'postgres_$$_public.t1'),
    broken('backup[0].db_table', 'postgres.public.t1', 'dots instead of _$$_'), broken('backup[0].backup_time', '01:00-02:00', 'no seconds'),
    broken('backup[0].backup_time', '01:00:00-01:00:00', 'empty window'), broken('backup[0].db_table', 'postgres_$$_public', 'schema shape for type table'),
    broken('backup[1].db_table', 'postgres_$$_public.t1', 'listed twice'), broken('backup[0].db_table', 'db_$$_sch.表', 'non-ASCII table name'),
  ],
  logical_restore: [
    missing('src_cluster_id'), missing('restore'), wrongType('restore_type', 'database'), wrongType('restore[0].db_table', 5),
    broken('restore[0].restore_time', '2023-13-01 00:00:00', 'month 13'), broken('restore[0].db_table', 'postgres', 'db shape for type table'),
    broken('restore[0].db_table', 'postgres_$$_public', 'schema shape for type db', { restore_type: 'db' }),
  ],
  get_expand_table_list: [missing('policy'), wrongType('policy', 'top_rows'), broken('shard_id', '1e3', 'exponent')],
  expand_cluster: [
    missing('table_list'), missing('dst_shard_id'), wrongType('table_list', 'postgres.public.t1'), wrongType('drop_old_table', 1),
    broken('table_list[0]', 'postgres.t1', 'two parts'), broken('dst_shard_id', '1', 'same as source shard'),
    broken('table_list', [], 'empty list'), broken('table_list[1]', 'postgres.public.t1', 'listed twice'),
    broken('drop_old_table', 'keep', 'not a flag'),
  ],
  repartition_tables: [
    missing('repartition_tables'), wrongType('repartition_tables', ['postgres_$$_public.t1=>postgres_$$_public.t2']),
    broken('repartition_tables', 'postgres_$$_public.t1=>postgres_$$_public.t1_new,other_$$_public.t2=>postgres_$$_public.t2_new', 'sources in two databases'),
    broken('repartition_tables', 'postgres_$$_public.t1->postgres_$$_public.t2', 'wrong arrow'),
    broken('repartition_tables', 'postgres_$$_public.t1=>postgres_$$_public', 'target without table'),
    broken('repartition_tables', '', 'empty'),
    broken('src_cluster_id', 'one', 'not an id'),
  ],
  get_meta_mode: NO_PARAS_VARIANTS,
  get_backup_storage: NO_PARAS_VARIANTS,
  get_machine_summary: NO_PARAS_VARIANTS,
  get_cluster_summary: NO_PARAS_VARIANTS,
  get_cluster_detail: [
    missing('cluster_name'), wrongType('cluster_name', 7), broken('cluster_name', 'drop table;', 'unsafe characters'),
    broken('cluster_id', 'x', 'not an id', { cluster_name: undefined }),
  ],
  get_variable: [
    missing('variable'), wrongType('port', 3306), broken('variable', 'innodb buffer', 'space in identifier'),
    broken('variable', 'größe', 'non-ASCII identifier'), broken('hostaddr', '127.0.2.1:57001', 'port in address'),
  ],
  raft_mission: [
    missing('task_type'), missing('target_leader'), wrongType('task_type', 'add_member'),
    broken('target_leader', '127.0.1.2', 'no port'), broken('target_leader', '127.0.1.2:0', 'port 0'),
    broken('target_leader', '::1:58001', 'IPv6 without brackets'), broken('peer', undefined, 'add_peer needs peer', { task_type: 'add_peer' }),
  ],
  manual_switch: [
    missing('assign_hostaddr'), missing('shard_id'), wrongType('master_hostaddr', { ip: '127.0.2.1', port: '55100' }),
    broken('master_hostaddr', '127.0.2.1:55100', 'colon instead of _'), broken('assign_hostaddr', '127.0.2.2_0', 'port 0'),
    broken('assign_hostaddr', 'db1_55100', 'a name, not an IP'), broken('assign_hostaddr', '127.0.2.1_55100', 'same node as the master'),
  ],
  set_noswitch: [
    missing('type'), missing('cluster_id'), wrongType('type', 1), wrongType('type', '2'),
    broken('timeout', '0', 'zero seconds'), broken('timeout', '604801', 'more than a week'),
    broken('timeout', undefined, 'type 1 needs a timeout'), broken('shard_id', 'shard_1', 'a name, not an id'),
  ],
  create_backup_storage: [
    missing('path'), missing('hostaddr'), wrongType('stype', 'gcs'), wrongType('port', 58100),
    broken('path', 'backups', 'relative path'), broken('path', '/', 'the root directory'), broken('path', '/srv/../etc', 'a .. segment'),
    broken('name', 'my storage', 'space in name'), broken('hostaddr', '127.0.2.1:58100', 'port in address'), broken('port', '70000', 'not a port'),
  ],
  delete_backup_storage: [missing('name'), wrongType('name', 1), broken('name', '../x', 'unsafe characters')],
  rotate_backup_key: [missing('name'), wrongType('name', 1), broken('retire_kek_id', 'kek_12', 'not a key id')],
  create_token: [
    missing('name'), missing('role'), wrongType('role', 'root'), wrongType('name', 5),
    broken('name', '-x', 'starts with -'), broken('token_sha256', 'ABC', 'not a SHA-256'),
  ],
  delete_token: [missing('name'), wrongType('name', 1), broken('name', 'a b', 'space in name')],
  list_tokens: NO_PARAS_VARIANTS,
  get_audit: [
    envelope('missing', 'without timestamp', 'timestamp', (b) => delete b.timestamp),
    wrongType('limit', 5), broken('limit', '0', 'below 1'), broken('limit', '10001', 'above 10000'), broken('since', 'x', 'not a number'),
  ],
  cancel_job: [missing('job_id'), wrongType('job_id', 12), broken('job_id', 'x', 'not an id')],
  list_jobs: [envelope('missing', 'without timestamp', 'timestamp', (b) => delete b.timestamp), wrongType('limit', 5), broken('limit', '0', 'below 1'), broken('limit', '1001', 'above 1000')],
  rotate_cluster_passwords: [
    missing('cluster_id'), wrongType('cluster_id', 1), wrongType('accounts', 'storage'), wrongType('accounts[1]', 'root'),
    broken('cluster_id', 'cluster_1', 'a name, not an id'), broken('accounts[1]', 'storage', 'the same account twice'), broken('accounts', [], 'an empty list'),
  ],
  upgrade_cluster: [
    missing('cluster_id'), wrongType('storage_version', 10.11), broken('storage_version', '10.6.18', 'another series'), broken('storage_version', '10.11', 'no patch level'),
    broken('computer_version', '16.1', 'another major'), broken('computer_version', '15.x', 'not a number'), broken('storage_version', undefined, 'no version at all', { storage_version: undefined, computer_version: undefined }),
  ],
  set_backup_policy: [
    missing('cluster_id'), wrongType('keep_days', 7), broken('window', '02:00-04:00', 'no seconds'), broken('full_every_hours', '0', 'no period'),
    broken('keep_sets', '0', 'keeps nothing'), broken('storage_name', '-x', 'not a storage name'), broken('keep_days', undefined, 'no retention at all', { keep_days: undefined, keep_sets: undefined }),
    broken('drill_storage_iplists', undefined, 'a drill schedule without scratch machines', { drill_every_days: '7', drill_computer_iplists: ['127.0.2.6'] }),
    broken('drill_every_days', undefined, 'drill machines without a schedule', { drill_storage_iplists: ['127.0.2.4'] }),
  ],
  delete_backup_policy: [missing('cluster_id'), wrongType('cluster_id', 1), broken('cluster_id', 'c1', 'a name, not an id')],
  run_restore_drill: [
    missing('cluster_id'), missing('storage_iplists'), missing('computer_iplists'), wrongType('point_in_time', '2'), wrongType('storage_iplists', '127.0.2.4'),
    broken('storage_iplists', [], 'no scratch machine'), broken('computer_iplists[0]', '127.0.2', 'not an address'), broken('nodes', '2', 'fewer than 3 nodes'),
    broken('backup_id', 'latest', 'not an id'),
  ],
};
