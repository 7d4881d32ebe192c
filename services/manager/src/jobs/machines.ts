// Job family: machines (create_machine, delete_machine, set_machine).

import { KcmError, parsePortRange, type EmptyResult, type ParasOf } from '@kcm/protocol';
import type { HostFactsReply } from '@kcm/agent-api';
import { CommandKind } from '../meta/commands';
import { machineKey, type HostFacts, type MetaState } from '../meta/state';
import { machinesOfHost } from '../meta/machines';
import { orThrow } from './framework/errors';
import type { JobOf } from './framework/workflow';

type CreateParas = ParasOf<'create_machine'>;
type DeleteParas = ParasOf<'delete_machine'>;
type SetParas = ParasOf<'set_machine'>;

export function factsFromAgent(reply: HostFactsReply): HostFacts {
  return {
    cores: reply.cores,
    memoryMb: reply.memory_mb,
    freeDiskBytes: Object.fromEntries(reply.disks.map((d) => [d.dir, d.free_bytes])),
    mariadbInstalled: reply.mariadb_installed,
    postgresInstalled: reply.postgres_installed,
  };
}

const DIR_FIELDS = ['datadir', 'logdir', 'wal_log_dir', 'comp_datadir'] as const;

function portRange(p: CreateParas): { low: number; high: number } {
  const parsed = parsePortRange(String(p.port_range));
  if (!parsed.ok) throw KcmError.of('INVALID_PARAS', `paras.port_range: ${parsed.rule}`, { field: 'paras.port_range' });
  return parsed.value;
}

function registeredHost(state: MetaState, hostaddr: string): boolean {
  return machinesOfHost(state, hostaddr).length > 0;
}

interface CreateOutputs {
  'contact agent': HostFacts;
  'prepare directories': null;
  'record machine': null;
}

export const createMachine: JobOf<'create_machine', CreateOutputs> = {
  jobType: 'create_machine',
  validate(p, state) {
    if (state.machines[machineKey(p.hostaddr, p.machine_type)]) {
      throw KcmError.of('CONFLICT', `machine ${p.hostaddr} is already registered as ${p.machine_type}`, { field: 'paras.hostaddr' });
    }
    const { low, high } = portRange(p);
    const clash = Object.values(state.machines).find((m) => m.hostaddr === p.hostaddr && m.portLow <= high && low <= m.portHigh);
    if (clash) {
      throw KcmError.of('CONFLICT', `paras.port_range: ${low}-${high} overlaps ${clash.portLow}-${clash.portHigh} of the ${clash.machineType} registration of ${p.hostaddr}`, { field: 'paras.port_range' });
    }
  },
  lockKey: (p) => `machine:${p.hostaddr}`,
  steps: (p) => [
    {
      name: 'contact agent',
      async run(ctx) {
        const facts = await ctx.withAgent(p.hostaddr, (agent) => agent.hostFacts(DIR_FIELDS.map((f) => p[f])));
        return factsFromAgent(facts);
      },
    },
    {
      name: 'prepare directories',
      async run(ctx) {
        const reply = await ctx.withAgent(p.hostaddr, (agent) => agent.prepareDirs(`job:${ctx.jobId}:dirs`, DIR_FIELDS.map((f) => p[f])));
        if (reply.problems.length > 0) {
          const fieldOf = (dir: string) => DIR_FIELDS.filter((f) => p[f] === dir).map((f) => `paras.${f}`).join('/');
          const detail = reply.problems.map((pr) => `${fieldOf(pr.dir)} ${pr.dir}: ${pr.reason}`).join('; ');
          // Well-formed paths the host disagrees with (a file in the way, no permission): state, not paras.
          throw KcmError.of('CONFLICT', `directories on ${p.hostaddr} cannot be used: ${detail}`);
        }
        return null;
      },
    },
    {
      name: 'record machine',
      async run(ctx) {
        const { low, high } = portRange(p);
        const existing = ctx.state().machines[machineKey(p.hostaddr, p.machine_type)];
        // Re-run after a crash: this job's own registration is already committed.
        if (existing && existing.portLow === low && existing.portHigh === high && existing.datadir === p.datadir) return null;
        orThrow(
          await ctx.propose({
            kind: CommandKind.MachineRegistered,
            at: ctx.now(),
            hostaddr: p.hostaddr,
            machineType: p.machine_type,
            portLow: low,
            portHigh: high,
            rackId: p.rack_id,
            datadir: p.datadir,
            logdir: p.logdir,
            walLogDir: p.wal_log_dir,
            compDatadir: p.comp_datadir,
            totalMemMb: Number(p.total_mem),
            totalCpuCores: Number(p.total_cpu_cores),
            facts: ctx.outputs['contact agent'],
          }),
        );
        return null;
      },
    },
  ],
  result: () => ({}),
};

export const deleteMachine: JobOf<'delete_machine', { 'remove machine': null }> = {
  jobType: 'delete_machine',
  validate(p, state) {
    if (!state.machines[machineKey(p.hostaddr, p.machine_type)]) {
      throw KcmError.of('NOT_FOUND', `machine ${p.hostaddr} is not registered as ${p.machine_type}`, { field: 'paras.hostaddr' });
    }
  },
  lockKey: (p) => `machine:${p.hostaddr}`,
  steps: (p) => [
    {
      name: 'remove machine',
      async run(ctx) {
        // Re-run after a crash: already removed by this job.
        if (!ctx.state().machines[machineKey(p.hostaddr, p.machine_type)]) return null;
        orThrow(await ctx.propose({ kind: CommandKind.MachineRemoved, at: ctx.now(), hostaddr: p.hostaddr, machineType: p.machine_type }));
        return null;
      },
    },
  ],
  result: () => ({}),
};

export const setMachine: JobOf<'set_machine', { 'set machine status': unknown }> = {
  jobType: 'set_machine',
  validate(p, state) {
    if (!registeredHost(state, p.hostaddr)) throw KcmError.of('NOT_FOUND', `machine ${p.hostaddr} is not registered`, { field: 'paras.hostaddr' });
  },
  lockKey: (p) => `machine:${p.hostaddr}`,
  steps: (p) => [
    {
      name: 'set machine status',
      async run(ctx) {
        return orThrow(
          await ctx.propose({ kind: CommandKind.MachineStatusSet, at: ctx.now(), hostaddr: p.hostaddr, nodeStats: p.node_stats, reason: 'operator' }),
        );
      },
    },
  ],
  result: () => ({}),
};
