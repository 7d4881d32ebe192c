// HOLLOW agents: a fleet simulator for the CONTROL PLANE ONLY. One process serves many
// agent endpoints, one per simulated host on loopback (127.0.0.0/8 all routes to lo), that
// answer Health and HostFacts like a real agent and ACCEPT INSTANCE COMMANDS BY RECORDING
// THEM: no engine is installed, started or touched. It exists to load the manager group
// with 1,000 hosts (kubemark's "hollow nodes"); nothing that claims a job works on real
// engines may use it (such tests run services/agent against mariadbd and postgres).
//
// Like a real agent it speaks mutual TLS and checks its callers (callerGuard: managers
// only), with one agent certificate naming every simulated host.
//
//   tsx bench/scale/hollow-agents.ts --first 127.50.0.1 --count 1000 --port 58100 \
//     --tls-ca ca.pem --tls-dir certs/ [--record commands.jsonl]
//
// --tls-dir holds a certificate per host, `<host>.pem`, naming only that host, as a real
// agent's does, and their one key `hosts.key` (testCertsPerHost). --tls-cert/--tls-key
// instead serve one certificate naming every host (a cost per handshake no real fleet has).
//
// Probes (MariaDbAgent.Probe, PostgresAgent.ProbePostgres, HostProbeAgent.ProbeHost,
// MariaDbHaAgent.ReplicationStatus) get a FIXED HEALTHY REPLY for every port asked about (a
// running, writable MariaDB master that its standbys reach; a running PostgreSQL accepting
// queries), not recorded: whatever the commands recorded, no
// hollow instance exists to measure. Agent.Watch and MariaDbHaAgent.WatchStatus beat like a
// real agent's (WatchStatus: every port healthy). --older-agents serves no HostProbeAgent and
// neither watch, as an agent older than the manager (UNIMPLEMENTED): the manager then probes
// per instance, polls Health and asks each master's status per round.
//
// It prints one JSON line {"ready": true, "hosts": N} once every endpoint listens, then
// serves until SIGTERM. SIGUSR2 toggles "silent" hosts listed in --silent-file (one per
// line): a silent host's Health fails as an unreachable agent would (UNAVAILABLE), and its
// Watch streams end so; and "hung" hosts listed in --hung-file: a hung host accepts calls and
// never answers them, and its Watch streams stay open without a beat (a stopped or wedged
// agent: only the caller's deadline, or its patience, ends the call).

import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import {
  AGENT_PROTO_FILES,
  callerGuard,
  loadAgentService,
  loadTlsMaterial,
  serveBeats,
  serverCredentials,
  useTls,
  type HealthReply,
  type HostFactsReply,
  type HostFactsRequest,
  type MariaDbHaStatusReply,
  type MariaDbProbeReply,
  type ProbeHostReply,
  type ProbeHostRequest,
  type ProbePostgresReply,
} from '@kcm/agent-api';

/** The host addresses first, first+1, ... (count of them), counting through the last two octets. */
export function hollowHosts(first: string, count: number): string[] {
  const [a, b, c, d] = first.split('.').map(Number);
  const start = (c << 8) + d;
  return Array.from({ length: count }, (_, i) => {
    const n = start + i;
    if (n > 0xfffe) throw new RangeError('too many hollow hosts for one /16');
    return `${a}.${b}.${n >> 8}.${n & 0xff}`;
  });
}

let services: { name: string; definition: grpc.ServiceDefinition }[] | undefined;

/** Every service of every agent proto, by name, and its service definition (loaded once: parsing the protos costs ~0.1 s). */
function agentServices(): { name: string; definition: grpc.ServiceDefinition }[] {
  if (services) return services;
  const out: { name: string; definition: grpc.ServiceDefinition }[] = [];
  for (const file of AGENT_PROTO_FILES) {
    const text = readFileSync(new URL(`../../proto/${file}`, import.meta.url), 'utf8');
    for (const [, name] of text.matchAll(/^service (\w+)/gm)) out.push({ name, definition: loadAgentService(file, name).service });
  }
  services = out;
  return out;
}

export interface HollowHostOptions {
  hostaddr: string;
  port: number;
  /** Told of every instance command (any rpc but Health/HostFacts): method path and request. */
  record(hostaddr: string, method: string, request: unknown): void;
  isSilent(hostaddr: string): boolean;
  /** A hung host's calls are never answered (optional: no host hangs). */
  isHung?(hostaddr: string): boolean;
  /** Serve no HostProbeAgent (an agent older than the manager). */
  olderAgent?: boolean;
  /** This host's own TLS server credentials (default: the process's, serverCredentials()). */
  credentials?: grpc.ServerCredentials;
}

/** One simulated host's agent endpoint: every agent service, with hollow handlers. */
export async function startHollowHost(opts: HollowHostOptions): Promise<grpc.Server> {
  const server = new grpc.Server({ interceptors: [callerGuard({ kind: 'agent', self: () => `${opts.hostaddr}:${opts.port}` })] });
  const startedAt = Date.now();
  for (const { name, definition } of agentServices()) {
    if (opts.olderAgent && name === 'HostProbeAgent') continue;
    const handlers: grpc.UntypedServiceImplementation = {};
    for (const [method, def] of Object.entries(definition)) {
      const watched = watchedBeat(`${name}.${method}`, opts.hostaddr, startedAt);
      if (watched) {
        if (opts.olderAgent) continue; // an agent older than the watch streams: the manager calls instead
        handlers[method] = (call: grpc.ServerWritableStream<{ interval_ms?: number }, unknown>) =>
          serveBeats(call, () => {
            if (opts.isHung?.(opts.hostaddr)) return undefined; // open, and silent
            if (opts.isSilent(opts.hostaddr)) throw Object.assign(new Error('hollow agent: host is silent'), { code: grpc.status.UNAVAILABLE });
            return watched(call.request);
          });
        continue;
      }
      if (def.requestStream || def.responseStream) {
        handlers[method] = (call: grpc.ServerWritableStream<unknown, unknown>) =>
          call.destroy(Object.assign(new Error(`hollow agent: ${name}.${method} (a stream) is not simulated`), { code: grpc.status.UNIMPLEMENTED }));
        continue;
      }
      handlers[method] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        if (opts.isHung?.(opts.hostaddr)) return; // the call stays open until the caller's deadline
        if (opts.isSilent(opts.hostaddr)) return callback({ code: grpc.status.UNAVAILABLE, details: 'hollow agent: host is silent' });
        if (name === 'Agent' && method === 'Health') return callback(null, health(opts.hostaddr, startedAt));
        if (name === 'Agent' && method === 'HostFacts') return callback(null, hostFacts(call.request as HostFactsRequest));
        const probe = probeReply(`${name}.${method}`, call.request);
        if (probe) return callback(null, probe);
        opts.record(opts.hostaddr, `${name}.${method}`, call.request);
        callback(null, {}); // every field at its default: a command that "succeeded" without doing anything
      };
    }
    server.addService(definition, handlers);
  }
  await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${opts.hostaddr}:${opts.port}`, opts.credentials ?? serverCredentials(), (err, port) => (err ? reject(err) : resolve(port))),
  );
  return server;
}

/** The beat of a watch stream this simulator serves (Agent.Watch, MariaDbHaAgent.WatchStatus), or undefined for any other method. */
function watchedBeat(method: string, hostaddr: string, startedAt: number): ((request: unknown) => unknown) | undefined {
  if (method === 'Agent.Watch') return () => health(hostaddr, startedAt);
  if (method === 'MariaDbHaAgent.WatchStatus') return (request) => ({ statuses: (request as { ports: number[] }).ports.map(replicationHealthy) });
  return undefined;
}

function health(hostaddr: string, startedAt: number): HealthReply {
  return { hostaddr, version: 'hollow', uptime_ms: Date.now() - startedAt, pid: process.pid };
}

/** The fixed healthy answer of a probe method, or undefined for any other method. */
function probeReply(method: string, request: unknown): MariaDbProbeReply | ProbePostgresReply | ProbeHostReply | MariaDbHaStatusReply | undefined {
  if (method === 'MariaDbAgent.Probe') return mariadbHealthy((request as { port: number }).port);
  if (method === 'MariaDbHaAgent.ReplicationStatus') return replicationHealthy((request as { port: number }).port);
  if (method === 'PostgresAgent.ProbePostgres') return POSTGRES_HEALTHY;
  if (method !== 'HostProbeAgent.ProbeHost') return undefined;
  const req = request as ProbeHostRequest;
  return {
    mariadb: req.mariadb_ports.map((port) => ({ port, probe: mariadbHealthy(port), error: '' })),
    postgres: req.postgres_ports.map((port) => ({ port, probe: POSTGRES_HEALTHY, error: '' })),
  };
}

function mariadbHealthy(port: number): MariaDbProbeReply {
  return {
    port, state: 'online', pid: process.pid, reason: '', is_replica: false, io_running: false, sql_running: false, seconds_behind_master: -1, last_error: '',
    gtid_current_pos: '', read_only: false, semi_sync_master: false, semi_sync_master_clients: 0, master_host: '', master_port: 0, supervisor_restarts: 0, desired_state: 'running',
  };
}

/** The failure detector's view of a healthy instance: running, answering SQL, and (as a standby would say) its master reachable. */
function replicationHealthy(port: number): MariaDbHaStatusReply {
  return {
    port, installed: true, running: true, answering: true, pid: process.pid, reason: '', read_only: false, gtid_current_pos: '', gtid_slave_pos: '', gtid_binlog_pos: '',
    is_replica: false, io_running: true, sql_running: true, master_host: '', master_port: 0, last_io_error: '', last_sql_error: '', gtid_io_pos: '',
    relay_applied: true, semi_sync_slave_active: false, semi_sync_master_enabled: false, semi_sync_master_clients: 0, master_reachable: true,
    supervisor_restarts: 0, desired_state: 'running', fenced: false, supervisor_restarted_at_ms: 0,
  };
}

const POSTGRES_HEALTHY: ProbePostgresReply = { installed: true, running: true, pid: process.pid, accepting: true, version: 'hollow', problem: '', supervisor_restarts: 0, desired_state: 'running' };

/** A comfortable host: 16 cores, 64 GiB, 1 TiB free in every directory asked about, both engines "installed". */
function hostFacts(req: HostFactsRequest): HostFactsReply {
  return {
    cores: 16,
    memory_mb: 65_536,
    disks: req.dirs.map((dir) => ({ dir, free_bytes: 1024 ** 4 })) as HostFactsReply['disks'],
    mariadb_installed: true,
    postgres_installed: true,
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      first: { type: 'string', default: '127.50.0.1' },
      count: { type: 'string', default: '1000' },
      port: { type: 'string', default: '58100' },
      'tls-ca': { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'tls-dir': { type: 'string' },
      record: { type: 'string' },
      'silent-file': { type: 'string' },
      'hung-file': { type: 'string' },
      'older-agents': { type: 'boolean', default: false },
    },
  });
  const hosts = hollowHosts(values.first!, Number(values.count));
  const dir = values['tls-dir'];
  if (!values['tls-ca'] || (!dir && (!values['tls-cert'] || !values['tls-key']))) throw new Error('--tls-ca and --tls-dir (or --tls-cert and --tls-key) are required (agents speak mutual TLS)');
  const certOf = (h: string) => (dir ? { ca: values['tls-ca']!, cert: path.join(dir, `${h}.pem`), key: path.join(dir, 'hosts.key') } : undefined);
  useTls(loadTlsMaterial(certOf(hosts[0]) ?? { ca: values['tls-ca'], cert: values['tls-cert']!, key: values['tls-key']! }, 'agent'));
  const caPem = readFileSync(values['tls-ca']);
  const keyPem = dir ? readFileSync(path.join(dir, 'hosts.key')) : undefined;
  const credentialsOf = (h: string) =>
    keyPem ? grpc.ServerCredentials.createSsl(caPem, [{ private_key: keyPem, cert_chain: readFileSync(certOf(h)!.cert) }], true) : undefined;
  let silent = new Set<string>();
  process.on('SIGUSR2', () => {
    silent = new Set(values['silent-file'] ? readFileSync(values['silent-file'], 'utf8').split('\n').filter(Boolean) : []);
  });
  let hung = new Set<string>();
  process.on('SIGUSR2', () => {
    const file = values['hung-file'];
    hung = new Set(file && existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []);
  });
  const record = values.record;
  const servers: grpc.Server[] = [];
  for (const hostaddr of hosts) {
    servers.push(
      await startHollowHost({
        hostaddr,
        port: Number(values.port),
        isSilent: (h) => silent.has(h),
        isHung: (h) => hung.has(h),
        olderAgent: values['older-agents'],
        credentials: credentialsOf(hostaddr),
        record: (h, method, request) => {
          if (record) appendFileSync(record, `${JSON.stringify({ hostaddr: h, method, request })}\n`);
        },
      }),
    );
  }
  process.on('SIGTERM', () => {
    for (const s of servers) s.forceShutdown();
    process.exit(0);
  });
  process.stdout.write(`${JSON.stringify({ ready: true, hosts: hosts.length })}\n`);
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  main().catch((err) => {
    process.stderr.write(`hollow agents: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
