// The version gate of the manager group (docs/upgrade.md). During a rolling upgrade the group
// mixes two builds; a member of the older one stops applying the log at a command kind it
// does not know (meta/apply-stop.ts). So:
//  - a command kind newer than protocol 1 is not proposed while any member might be older
//    (commandProtocolGate, in RaftMetaStore.propose);
//  - a job that needs the whole group (and some agents) at a protocol says so with
//    requireGroupProtocol, and is refused with CONFLICT naming who is still older.
// A member that has not answered since this member started counts as not known to be new
// enough: refusing is safe, proposing what it cannot apply is not.

import { KCM_PROTOCOL } from '@kcm/common';
import { KcmError } from '@kcm/protocol';
import { peerProtocols, type Agents, type WithAgent } from '@kcm/agent-api';
import { CommandKind } from '../meta/command-numbers';
import type { Command } from '../meta/commands';
import type { GroupProtocol, MemberVersion } from './member-versions';

/**
 * The last command kind every protocol-1 build (kcm 0.1.x, commit 18f544a) applies. Kinds
 * numbered after it need every member at protocol 2: add a kind after this, and it is gated.
 */
export const PROTOCOL_1_LAST_COMMAND_KIND = CommandKind.MachineFactsMeasured;

/** The protocol a member needs to apply a command of `kind`. */
export function protocolOfCommandKind(kind: number): number {
  return kind <= PROTOCOL_1_LAST_COMMAND_KIND ? 1 : 2;
}

/** How one member stands against `required`, in words; undefined when it is new enough. */
function shortOf(m: MemberVersion, required: number): string | undefined {
  if (m.protocol === undefined) {
    const why = m.lastError ? `: ${m.lastError}` : '';
    return `${m.member} (not answered since this member started, its kcm protocol is unknown${why})`;
  }
  if (m.protocol >= required) return undefined;
  return `${m.member} (kcm protocol ${m.protocol}, kcm ${m.kcmVersion || 'before 0.2.0'})`;
}

/** The members below `required`, described; empty when the whole group speaks it. */
export function membersBelow(members: readonly MemberVersion[], required: number): string[] {
  return members.flatMap((m) => shortOf(m, required) ?? []);
}

function checkRequired(required: number): void {
  if (!Number.isInteger(required) || required < 1 || required > KCM_PROTOCOL) {
    throw new Error(`requireGroupProtocol: protocol ${required} is not one this build speaks (1-${KCM_PROTOCOL})`);
  }
}

/**
 * RaftMetaStore's gate: a CONFLICT for a command some member could not apply, else undefined.
 * Decided on what the members last said (no call in the proposal path).
 */
export function commandProtocolGate(group: GroupProtocol): (cmd: Command) => KcmError | undefined {
  return (cmd) => {
    const required = protocolOfCommandKind(cmd.kind);
    if (required <= 1) return undefined;
    const below = membersBelow(group.list(), required);
    if (below.length === 0) return undefined;
    return KcmError.of('CONFLICT', `command kind ${cmd.kind} needs kcm protocol ${required} on every manager, and ${below.join(', ')} cannot be shown to speak it: finish upgrading the manager group first (docs/upgrade.md)`);
  };
}

/** What requireGroupProtocol reads from a job's step context. */
export interface ProtocolGateContext {
  /** The group's versions (StepServices.groupProtocol); absent: a one-process manager in a test, which is this build. */
  groupProtocol?: GroupProtocol;
  withAgent: WithAgent;
  agents: Pick<Agents, 'agentAddress'>;
}

/**
 * Refuses (KcmError CONFLICT) unless every manager of the group, and the agent of every host in
 * `opts.agentHosts`, speaks kcm protocol `required` or newer. Asks every member and agent
 * afresh. `what` names the job or operation for the message (e.g. 'upgrade_cluster').
 *
 * Use it in a job's first step (or its validate), before it commits anything that needs the
 * newer protocol: "upgrade_cluster needs kcm protocol 2 on every manager; still at an older
 * one: 127.0.1.3:58000 (kcm protocol 1, kcm before 0.2.0). Upgrade them first (docs/upgrade.md)".
 */
export async function requireGroupProtocol(ctx: ProtocolGateContext, required: number, what: string, opts: { agentHosts?: readonly string[] } = {}): Promise<void> {
  checkRequired(required);
  const members = ctx.groupProtocol ? await ctx.groupProtocol.measure() : [];
  const below = membersBelow(members, required);
  const agentsBelow = await agentsBelowProtocol(ctx, opts.agentHosts ?? [], required);
  const parts: string[] = [];
  if (below.length > 0) parts.push(`managers ${below.join(', ')}`);
  if (agentsBelow.length > 0) parts.push(`agents ${agentsBelow.join(', ')}`);
  if (parts.length === 0) return;
  const scope = opts.agentHosts?.length ? 'on every manager and on the agents of its hosts' : 'on every manager';
  throw KcmError.of('CONFLICT', `${what} needs kcm protocol ${required} ${scope}; still at an older one or not known: ${parts.join('; ')}. Upgrade them first (docs/upgrade.md)`);
}

/** The agents of `hosts` below `required` (or unreachable: then not known to be new enough), described. */
async function agentsBelowProtocol(ctx: ProtocolGateContext, hosts: readonly string[], required: number): Promise<string[]> {
  const found = await Promise.all(
    [...new Set(hosts)].map(async (host): Promise<string | undefined> => {
      const address = ctx.agents.agentAddress(host);
      try {
        // Any call states the agent's protocol; the client interceptor records it (protocol-version.ts).
        await ctx.withAgent(host, (agent) => agent.health());
      } catch (err) {
        const seen = peerProtocols().get(address);
        if (!seen || seen.accepted) return `${address} (did not answer: ${(err as Error).message})`;
      }
      const seen = peerProtocols().get(address);
      if (!seen) return `${address} (its kcm protocol is unknown)`;
      if (seen.protocol !== undefined && seen.protocol >= required && seen.accepted) return undefined;
      return `${address} (kcm protocol ${seen.protocol ?? 'unreadable'}, kcm ${seen.kcmVersion || 'before 0.2.0'})`;
    }),
  );
  return found.filter((f): f is string => f !== undefined);
}
