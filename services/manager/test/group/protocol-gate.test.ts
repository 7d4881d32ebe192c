// The manager group's version gate (group/protocol-gate.ts): during a rolling upgrade, no
// command kind a protocol-1 member cannot apply is proposed, and a job that needs the group
// at a protocol is refused with CONFLICT naming who is still older.

import { describe, expect, it } from 'vitest';
import { KcmError } from '@kcm/protocol';
import { CommandKind } from '../../src/meta/command-numbers';
import type { Command } from '../../src/meta/commands';
import type { GroupProtocol, MemberVersion } from '../../src/group/member-versions';
import { commandProtocolGate, PROTOCOL_1_LAST_COMMAND_KIND, protocolOfCommandKind, requireGroupProtocol } from '../../src/group/protocol-gate';

function group(members: MemberVersion[]): GroupProtocol & { measured: number } {
  const g = { measured: 0, list: () => members, measure: async () => (g.measured++, members) };
  return g;
}
const v = (member: string, protocol: number | undefined, kcmVersion = protocol === 2 ? '0.2.0' : ''): MemberVersion => ({ member, protocol, kcmVersion, answeredAtMs: protocol ? 1 : 0 });
const noAgents = { withAgent: async () => { throw new Error('no agent is asked here'); }, agents: { agentAddress: (h: string) => `${h}:58100` } };
const newKind = { kind: PROTOCOL_1_LAST_COMMAND_KIND + 1, at: 0 } as unknown as Command;
const oldKind = { kind: CommandKind.JobSubmitted, at: 0 } as unknown as Command;

describe('manager group version gate', () => {
  it('the kinds of the previous build (up to MachineFactsMeasured, 36) need protocol 1; any kind after them needs 2', () => {
    expect(PROTOCOL_1_LAST_COMMAND_KIND).toBe(36);
    expect(protocolOfCommandKind(CommandKind.MachineFactsMeasured)).toBe(1);
    expect(protocolOfCommandKind(37)).toBe(2);
  });

  it('a command kind newer than protocol 1 is refused while a member is at 1 or not known, and admitted once all speak 2', () => {
    const mixed = commandProtocolGate(group([v('127.0.1.1:58000', 2), v('127.0.1.2:58000', 2), v('127.0.1.3:58000', 1)]));
    expect(mixed(oldKind)).toBeUndefined();
    const refusal = mixed(newKind);
    expect(refusal).toBeInstanceOf(KcmError);
    expect(refusal?.errorName).toBe('CONFLICT');
    expect(refusal?.message).toMatch(/needs kcm protocol 2 on every manager, and 127\.0\.1\.3:58000 \(kcm protocol 1, kcm before 0\.2\.0\)/);
    expect(commandProtocolGate(group([v('127.0.1.1:58000', 2), v('127.0.1.2:58000', undefined)]))(newKind)?.message).toMatch(/127\.0\.1\.2:58000 \(not answered since this member started/);
    expect(commandProtocolGate(group([v('127.0.1.1:58000', 2), v('127.0.1.2:58000', 2)]))(newKind)).toBeUndefined();
  });

  it('requireGroupProtocol asks the members afresh and refuses with CONFLICT naming the members still at 1', async () => {
    const g = group([v('127.0.1.1:58000', 2), v('127.0.1.2:58000', 1), v('127.0.1.3:58000', 1)]);
    const refused = requireGroupProtocol({ groupProtocol: g, ...noAgents }, 2, 'upgrade_cluster');
    await expect(refused).rejects.toMatchObject({ errorName: 'CONFLICT', message: expect.stringMatching(/^upgrade_cluster needs kcm protocol 2 on every manager; still at an older one or not known: managers 127\.0\.1\.2:58000 \(kcm protocol 1, kcm before 0\.2\.0\), 127\.0\.1\.3:58000 .*Upgrade them first/) });
    expect(g.measured).toBe(1);
    await expect(requireGroupProtocol({ groupProtocol: group([v('127.0.1.1:58000', 2), v('127.0.1.2:58000', 2)]), ...noAgents }, 2, 'upgrade_cluster')).resolves.toBeUndefined();
    await expect(requireGroupProtocol({ groupProtocol: g, ...noAgents }, 1, 'anything')).resolves.toBeUndefined();
    await expect(requireGroupProtocol({ groupProtocol: g, ...noAgents }, 3, 'x')).rejects.toThrow(/not one this build speaks/);
  });

  it('requireGroupProtocol with agent hosts refuses an agent that does not answer (its protocol is not known)', async () => {
    const g = group([v('127.0.1.1:58000', 2)]);
    const ctx = { groupProtocol: g, withAgent: async () => { throw new Error('connect ECONNREFUSED'); }, agents: { agentAddress: (h: string) => `${h}:58100` } };
    await expect(requireGroupProtocol(ctx, 2, 'upgrade_cluster', { agentHosts: ['127.9.7.1'] })).rejects.toMatchObject({ errorName: 'CONFLICT', message: expect.stringMatching(/agents 127\.9\.7\.1:58100 \(did not answer: connect ECONNREFUSED\)/) });
  });
});
