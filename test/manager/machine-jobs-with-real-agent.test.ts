// Runs manager code (the machine jobs) against a real agent server in this process: it lives
// under test/, not services/manager, because services/manager never imports the agent.
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
// The manager's code imports only @kcm/agent-api; this test runs the jobs against a real agent server.
import { startAgent, type RunningAgent } from '@kcm/agent';
import { AgentPool } from '@kcm/agent-api';
import { KcmError } from '@kcm/protocol';
import { request, startHarness } from '../../services/manager/test/jobs/grow-harness';
import { until } from '../../services/manager/test/helpers/local-store';

describe('machine jobs against a real agent', () => {
  let agent: RunningAgent;
  let tmp: string;
  let h: Awaited<ReturnType<typeof startHarness>>;
  const deadHost = '127.0.0.77';

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'kcm-machines-'));
    agent = await startAgent({ hostaddr: '127.0.0.1', port: 0, logger: silentLogger(), stateDir: path.join(tmp, 'agent-state') });
    // A manager built like production with the real agent pool, at the live agent's port:
    // 127.0.0.1 reaches the agent, the "dead" host has nobody listening on that port.
    const agentPort = Number(agent.address.split(':').pop());
    h = await startHarness({ agents: new AgentPool(agentPort, { deadlineMs: 1500 }), hosts: [], closeAfterTest: false });
  });

  afterAll(async () => {
    await h.close();
    await agent.stop();
    await rm(tmp, { recursive: true, force: true });
  });

  const paras = (host: string, sub: string, portRange = '57000-57999') => ({
    hostaddr: host, machine_type: 'storage', port_range: portRange, rack_id: 'r1',
    datadir: path.join(tmp, sub, 'data'), logdir: path.join(tmp, sub, 'log'), wal_log_dir: path.join(tmp, sub, 'wal'),
    comp_datadir: path.join(tmp, sub, 'comp'), total_mem: '2048', total_cpu_cores: '2',
  });

  async function finished(jobId: string) {
    await until(() => ['done', 'failed'].includes(h.store.s.jobs[jobId].status), 10_000);
    return h.manager.service.getStatus(jobId);
  }

  it('create_machine contacts the agent, creates the directories and records the machine with its facts', async () => {
    const { jobId } = await h.manager.service.submitJob(request('create_machine', paras('127.0.0.1', 'm1')));
    const status = await finished(jobId);
    expect(status).toMatchObject({ status: 'done', errorCode: 0, attachment: {} });
    const m = h.store.s.machines['127.0.0.1/storage'];
    expect(m).toMatchObject({ portLow: 57000, portHigh: 57999, nodeStats: 'running' });
    expect(m.facts?.cores).toBe(os.availableParallelism());
    expect((await stat(path.join(tmp, 'm1', 'wal'))).isDirectory()).toBe(true);
  });

  it('a duplicate registration is refused at submission with CONFLICT, and no job is created', async () => {
    const jobsBefore = Object.keys(h.store.s.jobs).length;
    await expect(h.manager.service.submitJob(request('create_machine', paras('127.0.0.1', 'm1')))).rejects.toMatchObject({ errorName: 'CONFLICT' });
    await expect(h.manager.service.submitJob(request('create_machine', { ...paras('127.0.0.1', 'm1'), machine_type: 'computer', port_range: '57500-58500' }))).rejects.toThrow(/overlaps 57000-57999/);
    expect(Object.keys(h.store.s.jobs)).toHaveLength(jobsBefore);
  });

  it('an unreachable agent fails the job with AGENT_UNREACHABLE naming the address', async () => {
    const { jobId } = await h.manager.service.submitJob(request('create_machine', paras(deadHost, 'm2')));
    const status = await finished(jobId);
    expect(status.status).toBe('failed');
    expect(status.errorCode).toBe(KcmError.of('AGENT_UNREACHABLE', '').code);
    expect(status.errorInfo).toMatch(/step 1 of 3 \(contact agent\) failed: agent at 127\.0\.0\.77:\d+ is unreachable/);
    expect(h.store.s.machines[`${deadHost}/storage`]).toBeUndefined();
  });

  it('a directory that cannot be created fails the job naming the field', async () => {
    const aFile = path.join(tmp, 'plain-file');
    await writeFile(aFile, 'x');
    const { jobId } = await h.manager.service.submitJob(request('create_machine', { ...paras('127.0.0.1', 'm3', '59000-59999'), machine_type: 'computer', datadir: path.join(aFile, 'data') }));
    const status = await finished(jobId);
    expect(status.status).toBe('failed');
    expect(status.errorInfo).toMatch(/paras\.datadir .*plain-file\/data: ENOTDIR/);
    expect(status.errorCode).toBe(KcmError.of('CONFLICT', '').code);
  });

  it('set_machine moves the machine to dead and back; delete_machine removes it; unknown machines are NOT_FOUND', async () => {
    const dead = await h.manager.service.submitJob(request('set_machine', { hostaddr: '127.0.0.1', node_stats: 'dead' }));
    expect((await finished(dead.jobId)).status).toBe('done');
    expect(h.store.s.machines['127.0.0.1/storage'].nodeStats).toBe('dead');
    const del = await h.manager.service.submitJob(request('delete_machine', { hostaddr: '127.0.0.1', machine_type: 'storage' }));
    expect((await finished(del.jobId)).status).toBe('done');
    expect(h.store.s.machines['127.0.0.1/storage']).toBeUndefined();
    await expect(h.manager.service.submitJob(request('delete_machine', { hostaddr: '127.0.0.1', machine_type: 'storage' }))).rejects.toMatchObject({ errorName: 'NOT_FOUND' });
    await expect(h.manager.service.submitJob(request('set_machine', { hostaddr: '127.0.0.9', node_stats: 'dead' }))).rejects.toMatchObject({ errorName: 'NOT_FOUND' });
  });
});
