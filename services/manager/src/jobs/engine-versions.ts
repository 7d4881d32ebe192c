// Engine versions in jobs (docs/engine-versions.md): making sure every chosen host has a
// version before anything is installed, and recording what the instances were measured
// running. Shared by create_cluster, the jobs that add or rebuild instances, and
// upgrade_cluster (recordEngineVersions).
//
// Agents older than versioned engines answer PrepareEngine with UNIMPLEMENTED: the job goes on
// with what that agent runs (it ignores the version in an install too). Managers older than
// the EngineVersionsRecorded command keep it from being proposed (group/protocol-gate.ts):
// recording a measurement is then skipped, and the versions read "unknown" until it can be.

import { AgentCallError, isUnimplemented, type Agents } from '@kcm/agent-api';
import * as grpc from '@grpc/grpc-js';
import { KcmError } from '@kcm/protocol';
import { CommandKind, type EngineVersionsRecorded } from '../meta/commands';
import type { ClusterRecord, CompRecord, StorageNodeRecord } from '../meta/state';
import type { StepServices } from './framework/workflow';
import { orThrow } from './framework/errors';
import { opId } from './instance-ops';

/** The versions a create_cluster that names none gets (manager config); '' = each host's installed build. */
export interface EngineVersionDefaults {
  storage: string;
  computer: string;
}

export const NO_ENGINE_DEFAULTS: EngineVersionDefaults = { storage: '', computer: '' };

type EngineKind = 'mariadb' | 'postgres';
const PARA_OF: Record<EngineKind, string> = { mariadb: 'paras.storage_version', postgres: 'paras.computer_version' };

async function prepareOn(agents: Agents, kind: EngineKind, host: string, op: string, version: string): Promise<string | undefined> {
  try {
    const reply = kind === 'mariadb' ? await agents.mariadb(host).prepareEngine(op, version) : await agents.postgres(host).prepareEngine(op, version);
    return reply.version;
  } catch (err) {
    if (isUnimplemented(err)) return undefined; // an agent older than versioned engines: it runs what it has
    if (err instanceof AgentCallError && err.code === grpc.status.INVALID_ARGUMENT) {
      // The host's apt sources lack the version: the agent's message names what they have.
      const reason = err.message.replace(/^\d+ [A-Z_]+: /, ''); // grpc's "3 INVALID_ARGUMENT: " prefix
      throw KcmError.of('INVALID_PARAS', `${PARA_OF[kind]}: ${reason} (host ${host})`, { field: PARA_OF[kind] });
    }
    throw err;
  }
}

/**
 * Makes sure every host in `hosts` has `version` of the engine in its cache, before anything
 * is installed: a version one host cannot fetch fails here, naming it. '' asks the first
 * host for its default, which every other host then prepares, so one cluster runs one
 * version. Returns the version prepared ('' when no agent could say: all older agents).
 */
export async function prepareEngineOnHosts(ctx: Pick<StepServices, 'agents'>, jobId: string, kind: EngineKind, version: string, hosts: readonly string[]): Promise<string> {
  const unique = [...new Set(hosts)];
  if (unique.length === 0) return version;
  const op = (host: string, v: string) => opId(jobId, `prepare-${kind}-${v || 'default'}`, host);
  let chosen = version;
  let rest = unique;
  if (!chosen) {
    chosen = (await prepareOn(ctx.agents, kind, unique[0], op(unique[0], ''), '')) ?? '';
    rest = unique.slice(1);
  }
  await Promise.all(rest.map((host) => prepareOn(ctx.agents, kind, host, op(host, chosen), chosen)));
  return chosen;
}

/**
 * Records engine versions in the replicated state: the upgrade job's way to say what a node
 * or compute node runs now (after UpgradeEngine, with the version it measured), and the
 * cluster's versions for its next instances. Throws what the proposal met (a CONFLICT from
 * the group's version gate while a manager is older).
 */
export async function recordEngineVersions(ctx: Pick<StepServices, 'propose' | 'now'>, versions: Omit<EngineVersionsRecorded, 'kind' | 'at'>): Promise<void> {
  orThrow(await ctx.propose({ kind: CommandKind.EngineVersionsRecorded, at: ctx.now(), ...versions }));
}

/** What a storage node's server answers for @@version ("10.11.19-MariaDB-..." -> "10.11.19"); '' when it does not say. */
export async function measureStorageVersion(agents: Agents, node: Pick<StorageNodeRecord, 'hostaddr' | 'port'>): Promise<string> {
  const reply = await agents.mariadb(node.hostaddr).variables(node.port, ['version']);
  const text = reply.variables.find((v) => v.name.toLowerCase() === 'version')?.value ?? '';
  return /^\d+\.\d+\.\d+/.exec(text)?.[0] ?? '';
}

/** What a compute node's server answers for version() ("PostgreSQL 15.20 (Debian ...)" -> "15.20"); '' when it does not say. */
export async function measureComputerVersion(agents: Agents, comp: Pick<CompRecord, 'hostaddr' | 'port'>): Promise<string> {
  // The probe client: a probe's short deadline, not a command's.
  const probe = await agents.postgresProbe(comp.hostaddr).probe(comp.port);
  return /PostgreSQL (\d+\.\d+)/.exec(probe.version)?.[1] ?? '';
}

/**
 * Measures the listed instances and records their versions; best effort, never failing the
 * job: an instance that does not answer, or a group that cannot take the command yet, leaves
 * its version as it was ("unknown" for a new one). `cluster` versions are recorded with them.
 */
export async function recordMeasuredVersions(
  ctx: Pick<StepServices, 'agents' | 'propose' | 'now' | 'logger'>,
  cluster: ClusterRecord,
  instances: { nodes?: readonly StorageNodeRecord[]; comps?: readonly CompRecord[]; storageVersion?: string; computerVersion?: string },
): Promise<void> {
  const quietly = <T>(p: Promise<T>) => p.catch(() => '');
  const nodes = await Promise.all((instances.nodes ?? []).map(async (n) => ({ nodeId: n.id, version: await quietly(measureStorageVersion(ctx.agents, n)) })));
  const comps = await Promise.all((instances.comps ?? []).map(async (c) => ({ compId: c.id, version: await quietly(measureComputerVersion(ctx.agents, c)) })));
  try {
    await recordEngineVersions(ctx, {
      clusterId: cluster.id,
      nodes: nodes.filter((n) => n.version),
      comps: comps.filter((c) => c.version),
      ...(instances.storageVersion ? { storageVersion: instances.storageVersion } : {}),
      ...(instances.computerVersion ? { computerVersion: instances.computerVersion } : {}),
    });
  } catch (err) {
    ctx.logger.warn({ clusterId: cluster.id, err: (err as Error).message }, 'engine versions not recorded; they read as unknown until they are');
  }
}
