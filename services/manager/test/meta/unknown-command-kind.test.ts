// A member that meets a command kind it does not know (proposed by a newer kcm, or a retired
// number) stops applying at that entry instead of skipping it: skipping would let a
// mixed-version group diverge without anyone noticing (issue 35, item 8). Nomad does the
// same (nomad/fsm.go: panic on an unknown message type).

import { afterEach, describe, expect, it } from 'vitest';
import type { Entry } from '@kcm/raft';
import { CommandKind, encodeCommand, type Command, type LoggedCommand, type MachineRegistered } from '../../src/meta/commands';
import { applyCommand, applyLogged } from '../../src/meta/fsm';
import { UnknownCommandKindError } from '../../src/meta/apply-stop';
import { MetaStateMachine } from '../../src/meta/state-machine';
import { emptyMetaState } from '../../src/meta/state';
import { startInProcessManager, type InProcessManager } from '../helpers/in-process-manager';

const at = 1_700_000_000_000;

function machine(hostaddr: string): MachineRegistered {
  return {
    kind: CommandKind.MachineRegistered, at, hostaddr, machineType: 'storage', portLow: 57000, portHigh: 57099, rackId: 'r1',
    datadir: '/d', logdir: '/l', walLogDir: '/w', compDatadir: '/c', totalMemMb: 1024, totalCpuCores: 2, facts: null,
  };
}

/** A command of a kind this kcm has never heard of, as a newer kcm would write it. */
const FROM_A_NEWER_KCM = { kind: 9_999, at, clusterId: '1', something: 'new' } as unknown as Command;

function normal(index: number, cmd: LoggedCommand | Command): Entry {
  return { index, term: 1, type: 'normal', data: encodeCommand(cmd as LoggedCommand) };
}

describe('apply stops at a command kind it does not know', () => {
  it('applyCommand throws UnknownCommandKindError naming the kind, and changes nothing', () => {
    const s = emptyMetaState();
    applyCommand(s, machine('127.0.2.1'));
    const before = JSON.stringify(s);
    expect(() => applyCommand(s, FROM_A_NEWER_KCM)).toThrow(UnknownCommandKindError);
    expect(() => applyCommand(s, FROM_A_NEWER_KCM)).toThrow(/command kind 9999/);
    expect(JSON.stringify(s)).toBe(before);
  });

  it('a batch whose last command is unknown applies none of its commands', () => {
    const s = emptyMetaState();
    const batch = { kind: CommandKind.CommandBatch, at, commands: [machine('127.0.2.1'), FROM_A_NEWER_KCM] } as LoggedCommand;
    const applied: Command[] = [];
    expect(() => applyLogged(s, batch, (cmd) => applied.push(cmd))).toThrow(UnknownCommandKindError);
    expect(applied).toEqual([]);
    expect(s).toEqual(emptyMetaState());
  });

  it('the state machine applies up to the entry before it, reports where it stopped, and never goes past it', () => {
    const sm = new MetaStateMachine();
    expect(sm.applyStop).toBeUndefined();
    const entries = [normal(1, machine('127.0.2.1')), normal(2, FROM_A_NEWER_KCM), normal(3, machine('127.0.2.2'))];
    expect(() => sm.apply(entries)).toThrow(/log entry 2 holds command kind 9999/);
    expect(sm.appliedIndex()).toBe(1);
    expect(Object.values(sm.state.machines).map((m) => m.hostaddr)).toEqual(['127.0.2.1']);
    expect(sm.applyStop).toMatchObject({ index: 2, term: 1, kind: 9_999 });
    // Handed the rest again (or the same entry again), it still refuses to go past entry 2.
    expect(() => sm.apply([normal(3, machine('127.0.2.2'))])).toThrow(/log entry 2 holds command kind 9999/);
    expect(Object.values(sm.state.machines).map((m) => m.hostaddr)).toEqual(['127.0.2.1']);
    expect(sm.appliedIndex()).toBe(1);
  });
});

describe('a member that stopped applying says so', () => {
  let m: InProcessManager | undefined;
  afterEach(async () => {
    await m?.close();
    m = undefined;
  });

  it('a one-member manager given an unknown kind stops applying there, and /metrics and /healthz name the entry', async () => {
    m = await startInProcessManager();
    const { manager } = m;
    await m.registerMachine('127.0.2.1');
    expect((await manager.gateway.inject({ url: '/healthz' })).statusCode).toBe(200);

    const stoppedRaft = new Promise<unknown>((resolve, reject) => {
      manager.raft.once('fatal', resolve);
      setTimeout(() => reject(new Error('the member went on applying: no fatal stop within 10 s')), 10_000).unref();
    });
    const proposal = manager.raft.propose(encodeCommand(FROM_A_NEWER_KCM as unknown as LoggedCommand)).catch((err: unknown) => err);
    const fatal = await stoppedRaft;
    expect(fatal).toBeInstanceOf(UnknownCommandKindError);
    expect(await proposal).toBeInstanceOf(Error);
    const stoppedAt = (fatal as UnknownCommandKindError).index;
    expect(stoppedAt).toBeGreaterThan(0);

    // Nothing after it is applied: a later command is not taken.
    await expect(m.registerMachine('127.0.2.2')).rejects.toThrow();
    expect(Object.values(manager.store.state().machines).map((r) => r.hostaddr)).toEqual(['127.0.2.1']);

    const metrics = (await manager.gateway.inject({ url: '/metrics' })).body;
    expect(metrics).toMatch(new RegExp(`^kcm_meta_apply_stopped_index ${stoppedAt}$`, 'm'));
    const health = await manager.gateway.inject({ url: '/healthz' });
    expect(health.statusCode).toBe(503);
    expect(health.json()).toMatchObject({ status: 'apply stopped' });
    expect(String(health.json().reason)).toMatch(new RegExp(`log entry ${stoppedAt} holds command kind 9999`));
  });
});
