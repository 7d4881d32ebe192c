// Engine versions in the replicated state (meta/engine-versions.ts) and the job helpers that
// prepare and record them (jobs/engine-versions.ts), against stand-in agents.

import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { AgentCallError, type Agents } from '@kcm/agent-api';
import { KcmError } from '@kcm/protocol';
import { CommandKind, decodeCommand, encodeCommand, type Command } from '../../src/meta/commands';
import { applyCommand } from '../../src/meta/fsm';
import { nodeEngineVersion } from '../../src/meta/engine-versions';
import { restoreMeta, snapshotMeta } from '../../src/meta/snapshot/image';
import { prepareEngineOnHosts } from '../../src/jobs/engine-versions';
import { cluster, stateWith } from '../helpers/cluster-state';

const apply = (s: ReturnType<typeof stateWith>, cmd: Command) => applyCommand(s, decodeCommand(encodeCommand(cmd)) as Command);

describe('engine versions in the metadata', () => {
  it('records measured versions of nodes and compute nodes and the cluster\'s own; ids no longer there are passed over', () => {
    const s = stateWith(cluster('1', 'ready', [['1', '10.0.0.1', 5000], ['2', '10.0.0.2', 5000]], [['1', '10.0.0.3', 6000]]));
    expect(nodeEngineVersion(s.clusters['1'].shards['11'].nodes['1'])).toBe('unknown');
    const outcome = apply(s, {
      kind: CommandKind.EngineVersionsRecorded, at: 1, clusterId: '1', storageVersion: '10.11.19',
      nodes: [{ nodeId: '1', version: '10.11.18' }, { nodeId: '9', version: '10.11.18' }, { nodeId: '__proto__', version: 'x' }],
      comps: [{ compId: '1', version: '15.18' }, { compId: 'constructor', version: 'x' }],
    });
    expect(outcome).toEqual({ ok: true, value: { nodes: 1, comps: 1 } });
    const c = s.clusters['1'];
    expect(c.shards['11'].nodes['1'].engineVersion).toBe('10.11.18');
    expect(nodeEngineVersion(c.shards['11'].nodes['2'])).toBe('unknown');
    expect(c.comps['1'].engineVersion).toBe('15.18');
    expect(c.options.storageVersion).toBe('10.11.19');
    expect(c.options.computerVersion).toBeUndefined();
    // The versions survive a snapshot.
    expect(restoreMeta(snapshotMeta(s)).clusters['1'].shards['11'].nodes['1'].engineVersion).toBe('10.11.18');
  });

  it('a cluster that does not exist is refused', () => {
    const s = stateWith();
    expect(apply(s, { kind: CommandKind.EngineVersionsRecorded, at: 1, clusterId: '7', nodes: [] })).toMatchObject({ ok: false, refusal: 'NOT_FOUND' });
  });
});

/** Agents whose PrepareEngine answers per host: a version, or a gRPC status. */
function preparingAgents(answers: Record<string, (version: string) => string | grpc.status>) {
  const calls: { host: string; kind: string; version: string }[] = [];
  const answer = (host: string, kind: string) => async (_op: string, version: string) => {
    calls.push({ host, kind, version });
    const a = answers[host](version);
    if (typeof a === 'number') throw new AgentCallError(`${host}:1`, a, `${a} ${grpc.status[a]}: MariaDB ${version} is not in this host's apt sources (available: 10.11.19)`);
    return { version: a, debian_version: '', dir: '' };
  };
  const agents = {
    mariadb: (host: string) => ({ prepareEngine: answer(host, 'mariadb') }),
    postgres: (host: string) => ({ prepareEngine: answer(host, 'postgres') }),
  } as unknown as Agents;
  return { agents, calls };
}

describe('preparing an engine on every chosen host', () => {
  it('no version named: the first host\'s default is what every other host prepares', async () => {
    const { agents, calls } = preparingAgents({ a: (v) => v || '10.11.19', b: (v) => v || '10.11.18', c: (v) => v || '10.11.18' });
    expect(await prepareEngineOnHosts({ agents }, 'j1', 'mariadb', '', ['a', 'b', 'a', 'c'])).toBe('10.11.19');
    expect(calls).toEqual([
      { host: 'a', kind: 'mariadb', version: '' },
      { host: 'b', kind: 'mariadb', version: '10.11.19' },
      { host: 'c', kind: 'mariadb', version: '10.11.19' },
    ]);
  });

  it('a version one host cannot fetch fails with INVALID_PARAS naming the field, the host and what it has', async () => {
    const { agents } = preparingAgents({ a: (v) => v, b: () => grpc.status.INVALID_ARGUMENT });
    const err = await prepareEngineOnHosts({ agents }, 'j1', 'mariadb', '10.11.2', ['a', 'b']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KcmError);
    expect((err as KcmError).errorName).toBe('INVALID_PARAS');
    expect((err as KcmError).field).toBe('paras.storage_version');
    expect((err as Error).message).toBe("paras.storage_version: MariaDB 10.11.2 is not in this host's apt sources (available: 10.11.19) (host b)");
  });

  it('an agent older than versioned engines (UNIMPLEMENTED) is passed over: the job goes on with what it runs', async () => {
    const { agents } = preparingAgents({ old: () => grpc.status.UNIMPLEMENTED, b: (v) => v || '15.20' });
    expect(await prepareEngineOnHosts({ agents }, 'j1', 'postgres', '15.18', ['old', 'b'])).toBe('15.18');
    expect(await prepareEngineOnHosts({ agents }, 'j1', 'postgres', '', ['old'])).toBe('');
  });
});
