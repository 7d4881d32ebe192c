// Fake agents for job tests: every call is recorded in order, succeeds with a plausible
// reply, or fails where the test told it to. Typed as the manager's `Agents`, so a change
// of the agent contract (a new method, a new reply field) fails to compile here too.

import {
  AgentCallError,
  AgentUnreachableError,
  type AgentApi,
  type Agents,
  type CgroupAgentApi,
  type MariaDbAgentApi,
  type MariaDbHaAgentApi,
  type MariaDbHaStatusReply,
  type MariaDbRestoreAgentApi,
  type PasswordAgentApi,
  type HostProbeAgentApi,
  type ShardDataAgentApi,
  type TableMoveAgentApi,
  type RelationSwitchAgentApi,
  type MariaDbTablesAgentApi,
  type MariaDbLogicalAgentApi,
  type CatalogDumpAgentApi,
  type ShardRoutingAgentApi,
  type MariaDbInstanceReply,
  type MariaDbProbeReply,
  type MariaDbRebuildReply,
  type MariaDbRebuildRequest,
  type PostgresAgentApi,
  type PostgresInstanceReply,
  type ProbePostgresReply,
} from '@kcm/agent-api';

export interface Call {
  host: string;
  method: string;
  request: any;
}

export interface Failure {
  method: string;
  host: string;
  /** The host's agent dies at this call (as if SIGKILLed): this and every later call to it is unreachable until revived. */
  kill?: boolean;
}

export interface RecordingAgentsOptions {
  agentPort: number;
  /** Told failures; the test may push more while it runs. */
  failures: Failure[];
  /** Hosts whose agent does not answer (AgentUnreachableError); the test may change it. */
  down?: Set<string>;
  /** The tables (`db.table`) the instance at host:port reports (delete_shards asks a master). */
  tablesAt?: (host: string, port: number) => string[];
}

export function recordingAgents(options: RecordingAgentsOptions): { agents: Agents; calls: Call[] } {
  const { agentPort, failures } = options;
  const down = options.down ?? new Set<string>();
  const tablesAt = options.tablesAt ?? (() => []);
  const calls: Call[] = [];
  const agentAddress = (host: string) => `${host}:${agentPort}`;
  const record = <R>(host: string, method: string, request: unknown, reply: R): Promise<R> => {
    calls.push({ host, method, request });
    const failure = failures.find((f) => f.method === method && f.host === host);
    if (failure?.kill) down.add(host);
    if (down.has(host)) return Promise.reject(new AgentUnreachableError(agentAddress(host), new Error('connect ECONNREFUSED')));
    if (failure) return Promise.reject(new Error(`${method} failed on ${host}`));
    return Promise.resolve(reply);
  };

  const mysqlInstance = (port: number, pid: number): MariaDbInstanceReply => ({ port, state: 'online', pid, instance_dir: `/d/${port}`, socket: `/d/${port}/mysql.sock`, detail: '' });
  const copied = (r: MariaDbRebuildRequest): MariaDbRebuildReply => ({
    source_hostaddr: r.sources[0]?.hostaddr ?? '', source_port: r.sources[0]?.port ?? 0, gtid_pos: '0-1-5', bytes: 1000, transfer_ms: 10, kept_old_data: '', pid: 300,
  });
  const mysqlProbe = (port: number): MariaDbProbeReply => ({
    port, state: 'online', pid: 100, reason: '', is_replica: false, io_running: false, sql_running: false, seconds_behind_master: 0, last_error: '',
    gtid_current_pos: '', read_only: false, semi_sync_master: false, semi_sync_master_clients: 0, master_host: '', master_port: 0, supervisor_restarts: 0, desired_state: 'running',
  });
  const mariadb = (host: string): MariaDbAgentApi => ({
    address: agentAddress(host),
    install: (r) => record(host, 'mariadb.install', r, mysqlInstance(r.spec.port, 100)),
    start: (op, port) => record(host, 'mariadb.start', { op, port }, mysqlInstance(port, 100)),
    stop: (op, port) => record(host, 'mariadb.stop', { op, port }, { ...mysqlInstance(port, 0), state: 'stopped' }),
    remove: (op, port) => record(host, 'mariadb.remove', { op, port }, { ...mysqlInstance(port, 0), state: 'removed' }),
    configureReplication: (r) => record(host, 'mariadb.replication', r, { role: r.role, semi_sync_master: false, semi_sync_slave: false, read_only: r.role === 'standby' }),
    seedStandby: (r) => record(host, 'mariadb.seed', r, copied(r)),
    rebuildStandby: (r) => record(host, 'mariadb.rebuild', r, copied(r)),
    variables: (port, names = []) => record(host, 'mariadb.variables', { port, names }, { variables: [] }),
    probe: (port) => record(host, 'mariadb.probe', { port }, mysqlProbe(port)),
    listTables: (port) => record(host, 'mariadb.listTables', { port }, { tables: tablesAt(host, port) }),
    prepareEngine: (op, version) => record(host, 'mariadb.prepareEngine', { op, version }, { version: version || '10.11.19', debian_version: `1:${version || '10.11.19'}-0+deb12u1`, dir: `/e/mariadb-${version}` }),
    upgradeEngine: (op, port, version) => record(host, 'mariadb.upgradeEngine', { op, port, version }, { port, version_before: '10.11.18', version_after: version, engine_version: version, pid: 100, detail: '' }),
    close: () => {},
  });

  const pgInstance = (port: number, pid: number): PostgresInstanceReply => ({ port, datadir: `/c/${port}`, pid, running: pid > 0, user: 'postgres', detail: '' });
  const pgProbe: ProbePostgresReply = { installed: true, running: true, pid: 200, accepting: true, version: '15', problem: '' };
  const postgres = (host: string): PostgresAgentApi => ({
    address: agentAddress(host),
    install: (r) => record(host, 'pg.install', r, pgInstance(r.port, 200)),
    start: (op, port) => record(host, 'pg.start', { op, port }, pgInstance(port, 200)),
    stop: (op, port) => record(host, 'pg.stop', { op, port }, pgInstance(port, 0)),
    remove: (op, port, compDatadir) => record(host, 'pg.remove', { op, port, compDatadir }, pgInstance(port, 0)),
    probe: (port) => record(host, 'pg.probe', { port }, pgProbe),
    syncCatalog: (op, port, shards) => record(host, 'pg.sync', { op, port, shards }, { changes: [], servers_changed: [], foreign_tables: 0, elapsed_ms: 1 }),
    setVariables: (op, port, variables) => record(host, 'pg.setVariables', { op, port, variables }, { variables: [] }),
    getVariables: (port, names) => record(host, 'pg.getVariables', { port, names }, { variables: [] }),
    prepareEngine: (op, version) => record(host, 'pg.prepareEngine', { op, version }, { version: version || '15.20', debian_version: `${version || '15.20'}-0+deb12u1`, dir: `/e/postgres-${version}` }),
    upgradeEngine: (op, port, version) => record(host, 'pg.upgradeEngine', { op, port, version }, { port, version_before: '15.18', version_after: version, engine_version: version, pid: 200, detail: '' }),
    close: () => {},
  });

  const cgroup = (host: string): CgroupAgentApi => ({
    address: agentAddress(host),
    info: () => record(host, 'cgroup.info', {}, { version: 'v2', cpu_root: '/sys/fs/cgroup/kcm', problem: '' }),
    setCpuLimit: (op, p) => record(host, 'cgroup.set', { op, ...p }, { version: 'v2', cgroup_path: `/sys/fs/cgroup/kcm/${p.kind}-${host}-${p.port}`, written: [], pids: p.pid === undefined ? [] : [p.pid] }),
    removeCpuLimit: (op, port, kind) => record(host, 'cgroup.remove', { op, port, kind }, { version: 'v2', cgroup_path: '', written: [], pids: [] }),
    close: () => {},
  });

  const haStatus = (port: number): MariaDbHaStatusReply => ({
    port, installed: true, running: true, answering: true, pid: 100, reason: '', read_only: false, gtid_current_pos: '', gtid_slave_pos: '', gtid_binlog_pos: '',
    is_replica: false, io_running: false, sql_running: false, master_host: '', master_port: 0, last_io_error: '', last_sql_error: '', gtid_io_pos: '',
    relay_applied: true, semi_sync_slave_active: false, semi_sync_master_enabled: false, semi_sync_master_clients: 0, master_reachable: false,
    supervisor_restarts: 0, desired_state: 'running', fenced: false, supervisor_restarted_at_ms: 0,
  });
  const mariadbHa = (host: string): MariaDbHaAgentApi => ({
    address: agentAddress(host),
    replicationStatus: (port) => record(host, 'ha.status', { port }, haStatus(port)),
    // As an agent older than WatchStatus (UNIMPLEMENTED): the detector asks per master, and the calls are recorded.
    watchStatus: async () => {
      throw new AgentCallError(agentAddress(host), 12 /* UNIMPLEMENTED */, 'recording agents serve no WatchStatus');
    },
    promote: (r) => record(host, 'ha.promote', r, { gtid_current_pos: '', semi_sync_master: true, read_only: false, already_master: false, relay_applied: true }),
    repointStandby: (r) => record(host, 'ha.repoint', r, { gtid_slave_pos: '', io_running: true, sql_running: true }),
    fence: (op, port, stop) => record(host, 'ha.fence', { op, port, stop }, { was_running: true, made_read_only: true, stopped: stop, gtid_binlog_pos: '' }),
    waitForGtid: (port, gtid, timeoutMs) => record(host, 'ha.waitForGtid', { port, gtid, timeoutMs }, { reached: true, gtid_slave_pos: gtid, gtid_current_pos: gtid }),
    // No compute node prepares anything here: no branch is ever in doubt.
    listPreparedXa: (port) => record(host, 'ha.listPreparedXa', { port }, { branches: [], unreadable: 0 }),
    decideXa: (port, gtrid) => record(host, 'ha.decideXa', { port, gtrid }, { outcome: 'abort' as const, decided_now: true }),
    finishXa: (r) => record(host, 'ha.finishXa', r, { ended: true, held: false }),
    pruneXaDecisions: (r) => record(host, 'ha.pruneXaDecisions', r, { deleted: 0 }),
    renewMasterLeases: (r) => record(host, 'ha.renewMasterLeases', r, { fenced_ports: [] }),
    cutConnectionsTo: (h, port) => record(host, 'ha.cutConnectionsTo', { host: h, port }, { closed: 0 }),
    // One user table, held at the position the backup fakes report ('0-1-42').
    tableChecksums: (port, holdApply) => record(host, 'ha.tableChecksums', { port, holdApply }, { gtid_pos: '0-1-42', tables: [{ database: 'db', table: 't', rows: 3, checksum: '12345' }], held: holdApply }),
    resumeApply: (port) => record(host, 'ha.resumeApply', { port }, { sql_running: true }),
    close: () => {},
  });

  const mariadbRestore = (host: string): MariaDbRestoreAgentApi => ({
    address: agentAddress(host),
    listBinlogs: (port, flush) => record(host, 'restore.listBinlogs', { port, flush }, { files: [], server_id: 1 }),
    archiveBinlog: (r) => Promise.reject(new Error(`archiveBinlog is not faked (${host}:${r.port ?? ''})`)),
    restoreFullBackup: (r) => record(host, 'restore.full', r, { gtid_pos: '', bytes: 0, pid: 100 }),
    replayBinlogs: (r) => record(host, 'restore.replay', r, { gtid_pos: r.start_gtid, files: r.binlogs.length, bytes: 0 }),
    dropClusterDatabases: (op, port) => record(host, 'restore.dropDatabases', { op, port }, { dropped: [] }),
    close: () => {},
  });

  const passwords = (host: string): PasswordAgentApi => ({
    address: agentAddress(host),
    setMariaDbPasswords: (op, port, accounts) => record(host, 'passwords.mariadb', { op, port, accounts }, { roles: accounts.map((a) => a.role) }),
    setReplicationPassword: (op, port, account) => record(host, 'passwords.replication', { op, port, ...account }, { is_replica: true, master_host: '', master_port: 0, io_running: true, sql_running: true }),
    setComputePassword: (op, port, account) => record(host, 'passwords.compute', { op, port, ...account }, { user: account.user }),
    close: () => {},
  });

  // Every named instance of a host in one call, each answering as its own probe does.
  const hostProbe = (host: string): HostProbeAgentApi => ({
    address: agentAddress(host),
    probeHost: (r) =>
      record(host, 'hostProbe.probeHost', r, {
        mariadb: r.mariadb_ports.map((port) => ({ port, probe: mysqlProbe(port), error: '' })),
        postgres: r.postgres_ports.map((port) => ({ port, probe: pgProbe, error: '' })),
      }),
    close: () => {},
  });

  // The host-level agent (health checks of the pool's users): answers unless the host is down.
  const hostAgent = (host: string): AgentApi => ({
    address: agentAddress(host),
    health: async () => ({ hostaddr: host, version: 'test', uptime_ms: 1, pid: 1 }),
    // Beats at once and every interval while the host is up; a host taken down ends it as a broken link would.
    watch: (intervalMs, onBeat, signal) =>
      new Promise<void>((resolve, reject) => {
        const beat = () => {
          if (signal.aborted) return finish();
          if (down.has(host)) return finish(new AgentUnreachableError(agentAddress(host), new Error('connection reset')));
          onBeat({ hostaddr: host, version: 'test', uptime_ms: 1, pid: 1 });
        };
        const timer = setInterval(beat, intervalMs);
        const finish = (err?: Error) => {
          clearInterval(timer);
          if (err) reject(err);
          else resolve();
        };
        signal.addEventListener('abort', () => finish(), { once: true });
        beat();
      }),
    hostFacts: async () => ({ cores: 16, memory_mb: 65536, disks: [], mariadb_installed: true, postgres_installed: true }),
    prepareDirs: async () => ({ problems: [] }),
    close: () => {},
  });
  // Moves, cut-overs, table probes, logical dumps and catalog dumps are faked by the tests
  // that use them (Object.assign over `agents`) or run on real engines (test/cluster): here
  // every such call is refused as UNIMPLEMENTED, or unreachable for a host taken down.
  const unfaked = <T,>(kind: string) => (host: string): T =>
    new Proxy({ address: agentAddress(host), close: () => {} } as unknown as object, {
      get: (target, name) =>
        name in target
          ? Reflect.get(target, name)
          : async () => {
              if (down.has(host)) throw new AgentUnreachableError(agentAddress(host), new Error('connect ECONNREFUSED'));
              throw new AgentCallError(agentAddress(host), 12, `recording agents: no ${kind}.${String(name)}`);
            },
    }) as T;
  const agents: Agents = {
    withAgent: (host, use) => (down.has(host) ? Promise.reject(new AgentUnreachableError(agentAddress(host), new Error('connect ECONNREFUSED'))) : use(hostAgent(host))),
    mariadb,
    postgres,
    postgresProbe: postgres,
    mariadbHa,
    mariadbRestore,
    passwords,
    cgroup,
    hostProbe,
    shardData: unfaked<ShardDataAgentApi>('ShardDataAgent'),
    tableMove: unfaked<TableMoveAgentApi>('TableMoveAgent'),
    relationSwitch: unfaked<RelationSwitchAgentApi>('RelationSwitchAgent'),
    mariadbTables: unfaked<MariaDbTablesAgentApi>('MariaDbTablesAgent'),
    mariadbLogical: unfaked<MariaDbLogicalAgentApi>('MariaDbLogicalAgent'),
    catalogDump: unfaked<CatalogDumpAgentApi>('CatalogDumpAgent'),
    // UNIMPLEMENTED, as an older agent answers: a switch goes on without the holds.
    shardRouting: unfaked<ShardRoutingAgentApi>('ShardRoutingAgent'),
    agentAddress,
    close: () => {},
  };
  return { agents, calls };
}
