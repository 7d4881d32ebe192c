// The agent's /metrics (docs/agent-metrics.md): a registry of its own (an agent run in a test
// process beside others keeps its own figures). Instance states and disk space are measured
// at scrape time: the state is whether the instance's server process runs now (the
// supervisor's pid check), never a stored word; restart counts are the supervisor's records,
// kept across agent restarts.

import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { KCM_VERSION } from '@kcm/common';
import { activeTls, exportCertExpiry } from '@kcm/agent-api';
import { freeBytes } from '../ops/disk-space';
import type { InstanceCensus } from '../capabilities/supervisor';
import type { TransferRecorder } from './transfers';

/** Directories the managers registered on this host (create_machine, host-facts rounds), at most this many. */
export const MAX_DATA_DIRS = 64;

export interface AgentMetrics {
  registry: Registry;
  /** A data-plane transfer this agent served ended. */
  observeTransfer(op: string, result: 'ok' | 'failed', bytes: number): void;
  /** Directories the managers asked about (PrepareDirs, HostFacts): their free space is exported. */
  noteDataDirs(dirs: readonly string[]): void;
  /** Transfers this agent received, by kind (transfers.ts: the server runs every call inside it). */
  received: TransferRecorder;
}

/** What an instance's measured state is called in kcm_agent_instances. */
export function instanceState(i: Pick<InstanceCensus, 'desired' | 'running'>): 'running' | 'down' | 'stopped' {
  if (i.running) return 'running';
  // Wanted running and no process: crashed or killed, the supervisor restarting it (or blocked).
  return i.desired === 'running' ? 'down' : 'stopped';
}

export function createAgentMetrics(sources: { census: () => Promise<InstanceCensus[]> }): AgentMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const dataDirs = new Set<string>();

  new Gauge({
    name: 'kcm_agent_info',
    help: 'Always 1; the kcm release of this agent in the version label',
    labelNames: ['version'],
    registers: [registry],
    collect() {
      this.set({ version: KCM_VERSION }, 1);
    },
  });

  // One census per scrape serves both families below (each collect asks for it; the second reuses it).
  let census: Promise<InstanceCensus[]> | undefined;
  const takeCensus = () => {
    if (!census) {
      census = sources.census();
      void census.finally(() => setImmediate(() => (census = undefined))).catch(() => {});
    }
    return census;
  };
  new Gauge({
    name: 'kcm_agent_instances',
    help: 'Database instances on this host by kind and measured state: running (its server process runs), down (wanted running, no process: the supervisor restarts it), stopped (stopped on purpose)',
    labelNames: ['kind', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const kind of ['mariadb', 'postgres']) for (const state of ['running', 'down', 'stopped']) this.set({ kind, state }, 0);
      for (const i of await takeCensus()) this.inc({ kind: i.kind, state: instanceState(i) });
    },
  });
  new Gauge({
    name: 'kcm_agent_instance_up',
    help: '1 when the instance\'s server process runs now, 0 when not, by kind and port',
    labelNames: ['kind', 'port'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const i of await takeCensus()) this.set({ kind: i.kind, port: String(i.port) }, i.running ? 1 : 0);
    },
  });
  new Counter({
    name: 'kcm_agent_supervisor_restarts_total',
    help: 'Times the agent\'s supervisor started an instance again after finding its server process gone (kept across agent restarts; gone with the instance)',
    labelNames: ['kind', 'port'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const i of await takeCensus()) this.inc({ kind: i.kind, port: String(i.port) }, i.restarts);
    },
  });

  // The data plane (plane/server.ts) serves two ops: `backup` (a physical backup of a local
  // instance: full backups, rebuilds and new standbys) and `get` (a stored backup object: restores).
  const transfers = new Counter({
    name: 'kcm_agent_plane_transfers_total',
    help: 'Data-plane transfers this agent served, by op (backup: a physical backup stream; get: a stored backup object) and result',
    labelNames: ['op', 'result'],
    registers: [registry],
  });
  const sentBytes = new Counter({
    name: 'kcm_agent_plane_sent_bytes_total',
    help: 'Bytes this agent sent over its data plane, by op',
    labelNames: ['op'],
    registers: [registry],
  });

  // The receiving side, by what the transfer is for (transfers.ts): backup, rebuild, restore.
  const receivedTransfers = new Counter({
    name: 'kcm_agent_transfers_received_total',
    help: 'Transfers this agent received, by kind (backup: a backup stream into its storage; rebuild: a copy for a new or rebuilt standby; restore: a stored backup or binlog read back) and result',
    labelNames: ['kind', 'result'],
    registers: [registry],
  });
  const receivedBytes = new Counter({
    name: 'kcm_agent_transfer_received_bytes_total',
    help: 'Bytes this agent received in transfers (as they crossed the network: compressed, sealed), by kind',
    labelNames: ['kind'],
    registers: [registry],
  });

  new Gauge({
    name: 'kcm_agent_disk_free_bytes',
    help: 'Free bytes (for an unprivileged user) of the filesystem holding each directory the managers registered on this host',
    labelNames: ['dir'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const dir of dataDirs) {
        const free = await freeBytes(dir).catch(() => undefined);
        if (free !== undefined) this.set({ dir }, free);
      }
    },
  });

  exportCertExpiry(registry, { use: 'grpc' }, () => activeTls()?.cert);

  return {
    registry,
    received: {
      received: (kind, bytes) => receivedBytes.inc({ kind }, bytes),
      ended: (kind, result) => receivedTransfers.inc({ kind, result }),
    },
    observeTransfer(op, result, bytes) {
      transfers.inc({ op, result });
      if (bytes > 0) sentBytes.inc({ op }, bytes);
    },
    noteDataDirs(dirs) {
      for (const dir of dirs) {
        if (dataDirs.size >= MAX_DATA_DIRS) return;
        if (dir.startsWith('/')) dataDirs.add(dir);
      }
    },
  };
}
