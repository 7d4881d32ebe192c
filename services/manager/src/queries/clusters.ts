// Cluster queries (spec 4.6): which clusters exist comes from the replicated state; every
// status (summary, detail) and get_variable is measured live from the agents. A status is
// never copied from metadata: `online` / `offline` as the agent measured it, `unknown` when
// the agent did not answer or has no such instance; a cluster's from its instances'
// (cluster-status.ts).

import { catalogErrorOf, type MariaDbAgentClient, type Agents } from '@kcm/agent-api';
import { KcmError, type ClusterDetailEngineVersions, type InstanceEngineVersion, type ValidRequest } from '@kcm/protocol';
import { nodeEngineVersion } from '../meta/engine-versions';
import { clusterByReference } from '../jobs/cluster-lookup';
import type { QueryHandler } from '../submit/manager-service';
import type { CompRecord, MetaState, StorageNodeRecord } from '../meta/state';
import { noSwitchUntil } from '../meta/noswitch';
import { measuredClusterStatus, onlineCount, type InstanceStatus } from './cluster-status';
import { InstanceMeasurements, type Measured } from './instance-measurements';
import { HostProbes, type CompProbe } from './host-probes';
import { scratchMark } from './restore-drills';

export type { InstanceStatus } from './cluster-status';
type MariaDbProbeReplyLike = Awaited<ReturnType<MariaDbAgentClient['probe']>>;

export interface ClusterQueryDeps {
  agents: Agents;
  /** The manager's clock (ms): an expired no-switch window is not shown. Default Date.now. */
  now?: () => number;
  /**
   * Shared by every cluster query of this manager: concurrent queries share one probe per
   * instance (one agent call per host), and few agent calls are open at once. Default: one
   * per call.
   */
  measurements?: InstanceMeasurements;
  /** How one host's instances are measured (one call per host); shared like `measurements`. */
  hostProbes?: HostProbes;
}

export async function clusterSummary(state: MetaState, deps: ClusterQueryDeps): Promise<Record<string, unknown>> {
  const measurements = deps.measurements ?? new InstanceMeasurements();
  const list_cluster = await Promise.all(
    Object.values(state.clusters).map(async (c) => {
      const nodes = Object.values(c.shards).flatMap((s) => Object.values(s.nodes));
      const comps = Object.values(c.comps);
      const [nodeProbes, compProbes] = await Promise.all([
        Promise.all(nodes.map((n) => probeNode(deps, measurements, n))),
        Promise.all(comps.map((comp) => probeComp(deps, measurements, comp))),
      ]);
      const nodeStatuses = nodeProbes.map((m) => storageNodeView(m.value).status);
      const compStatuses = compProbes.map((m) => m.value.status);
      return {
        cluster_id: c.id,
        cluster_name: c.name,
        nick_name: c.nickName,
        ...scratchMark(c),
        shards: String(Object.keys(c.shards).length),
        comps: String(comps.length),
        status: measuredClusterStatus(c.status, [...nodeStatuses, ...compStatuses]),
        nodes_online: onlineCount(nodeStatuses),
        comps_online: onlineCount(compStatuses),
        // How old the oldest measurement behind this status is (ms): statuses are measured,
        // and a probe finished less than a second ago is shared rather than repeated.
        measured_age_ms: measurements.ageOf([...nodeProbes, ...compProbes]),
      };
    }),
  );
  return { list_cluster };
}

/** A storage node's measured status and whether it acts as a master (writable, replicating from no one). */
export function storageNodeView(probe: MariaDbProbeReplyLike | undefined): { status: InstanceStatus; master: boolean } {
  if (!probe) return { status: 'unknown', master: false };
  return { status: probe.state, master: probe.state === 'online' && !probe.is_replica && !probe.read_only };
}

function probeNode(deps: ClusterQueryDeps, measurements: InstanceMeasurements, node: StorageNodeRecord): Promise<Measured<MariaDbProbeReplyLike | undefined>> {
  return measurements.measureOnHost('mariadb', node.hostaddr, node.port, hostProbesOf(deps).measure);
}

/** A compute node's measured status, and how often its agent had to restart it. */
function probeComp(deps: ClusterQueryDeps, measurements: InstanceMeasurements, comp: CompRecord): Promise<Measured<CompProbe>> {
  return measurements.measureOnHost('postgres', comp.hostaddr, comp.port, hostProbesOf(deps).measure);
}

/** One call per host (HostProbes); deps without one get their own, remembering older agents for this query only. */
const hostProbesOf = (deps: ClusterQueryDeps): HostProbes => (deps.hostProbes ??= new HostProbes(deps.agents));

export async function clusterDetail(state: MetaState, req: ValidRequest, deps: ClusterQueryDeps): Promise<Record<string, unknown>> {
  const cluster = clusterByReference(state, req.paras as { cluster_name?: string; cluster_id?: string });
  const shards = Object.values(cluster.shards);
  const comps = Object.values(cluster.comps);
  const nowMs = (deps.now ?? Date.now)();
  const measurements = deps.measurements ?? new InstanceMeasurements();
  const measured: Measured<unknown>[] = [];
  const [list_shard, list_comp] = await Promise.all([
    Promise.all(
      shards.map(async (s) => ({
        shard_id: s.id,
        shard_name: s.name,
        nodes: String(Object.keys(s.nodes).length),
        // set_noswitch: no automatic failover before this Unix second; '' = none open.
        noswitch_until: windowEnd(noSwitchUntil(state, cluster.id, s.id, nowMs)),
        list_node: await Promise.all(
          Object.values(s.nodes).map(async (n) => {
            const m = await probeNode(deps, measurements, n);
            measured.push(m);
            const probe = m.value;
            const view = storageNodeView(probe);
            return {
              node_id: n.id,
              hostaddr: n.hostaddr,
              port: String(n.port),
              status: view.status,
              master: String(view.master),
              // Replication as measured, so an operator sees why a standby is not healthy.
              replica_of: probe?.is_replica ? `${probe.master_host}:${probe.master_port}` : '',
              replication_error: probe?.last_error ?? '',
              // Times its agent found it down and started it again (issue 12: instances come back).
              restarts: String(probe?.supervisor_restarts ?? 0),
              // A replaced master kept out of service until it rejoins (shard HA): why, or ''.
              fenced: n.fenced ? n.fenced.reason : '',
              // The MariaDB version kcm measured it running (install, rebuild, upgrade); "unknown" before that.
              ...({ engine_version: nodeEngineVersion(n) } satisfies InstanceEngineVersion),
            };
          }),
        ),
      })),
    ),
    Promise.all(
      comps.map(async (c) => {
        const m = await probeComp(deps, measurements, c);
        measured.push(m);
        const { status, restarts } = m.value;
        const engine: InstanceEngineVersion = { engine_version: nodeEngineVersion(c) };
        return { comp_id: c.id, comp_name: c.name, hostaddr: c.hostaddr, port: String(c.port), status, restarts: String(restarts), ...engine };
      }),
    ),
  ]);
  return {
    cluster_id: cluster.id,
    cluster_name: cluster.name,
    nick_name: cluster.nickName,
    ...scratchMark(cluster),
    status: measuredClusterStatus(cluster.status, [...list_shard.flatMap((s) => s.list_node.map((n) => n.status)), ...list_comp.map((c) => c.status)]),
    shards: String(shards.length),
    comps: String(comps.length),
    // What the cluster's next instances get (create_cluster, upgrade_cluster); '' = each host's default.
    ...({ storage_version: cluster.options.storageVersion ?? '', computer_version: cluster.options.computerVersion ?? '' } satisfies ClusterDetailEngineVersions),
    list_shard,
    list_comp,
    // How old the oldest measurement in this reply is (ms); see clusterSummary.
    measured_age_ms: measurements.ageOf(measured),
  };
}

const windowEnd = (untilMs: number | null): string => (untilMs === null ? '' : String(Math.floor(untilMs / 1000)));

/** A variable of an instance kcm manages: a storage node (MariaDB) or a compute node (PostgreSQL). */
export async function instanceVariable(state: MetaState, req: ValidRequest, deps: ClusterQueryDeps): Promise<Record<string, unknown>> {
  const p = req.paras as { hostaddr: string; port: number; variable: string };
  const clusters = Object.values(state.clusters);
  const node = clusters.flatMap((c) => Object.values(c.shards).flatMap((s) => Object.values(s.nodes))).find((n) => n.hostaddr === p.hostaddr && n.port === p.port);
  const comp = clusters.flatMap((c) => Object.values(c.comps)).find((c) => c.hostaddr === p.hostaddr && c.port === p.port);
  if (!node && !comp) {
    throw KcmError.of('NOT_FOUND', `paras.hostaddr/paras.port: ${p.hostaddr}:${p.port} is not an instance kcm manages`, { field: 'paras.port' });
  }
  let variables: { name: string; value: string }[];
  try {
    variables = node
      ? (await deps.agents.mariadb(p.hostaddr).variables(p.port, [p.variable])).variables
      : (await deps.agents.postgresProbe(p.hostaddr).getVariables(p.port, [p.variable])).variables;
  } catch (err) {
    throw KcmError.of(catalogErrorOf(err) === 'AGENT_UNREACHABLE' ? 'AGENT_UNREACHABLE' : 'INSTANCE_FAILED', `reading ${p.variable} on ${p.hostaddr}:${p.port}: ${(err as Error).message}`, { cause: err });
  }
  const found = variables.find((v) => v.name.toLowerCase() === p.variable.toLowerCase());
  if (!found) throw KcmError.of('NOT_FOUND', `paras.variable: ${p.hostaddr}:${p.port} has no variable ${p.variable}`, { field: 'paras.variable' });
  return { result: 'true', value: found.value };
}

export function clusterQueries(deps: ClusterQueryDeps): [string, QueryHandler][] {
  deps = { ...deps, measurements: deps.measurements ?? new InstanceMeasurements(), hostProbes: deps.hostProbes ?? new HostProbes(deps.agents) };
  return [
    ['get_cluster_summary', (_req, state) => clusterSummary(state, deps)],
    ['get_cluster_detail', (req, state) => clusterDetail(state, req, deps)],
    ['get_variable', (req, state) => instanceVariable(state, req, deps)],
  ];
}
