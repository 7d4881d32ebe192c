// A real one-member manager (Raft, the meta state machine, the gateway and the job
// service), built in-process through buildManager for unit-suite tests of what the gateway
// acknowledges. Raft keeps its log in memory (MemoryStorage: no directory); its gRPC
// transport is the production one, as it also serves submissions forwarded by followers.
// No agent runs: the agent port is one where nothing listens, so a probe fails at once.
// Leader services (job runner, health monitor, catalog sync) are stopped once it leads:
// accepted jobs stay queued and nothing changes the state but the requests a test sends,
// unless the test asks for them (`leaderServices`) to see jobs run.

import { createServer } from 'node:net';
import { createLogger } from '@kcm/common';
import { MemoryStorage } from '@kcm/raft';
import type { ReplyEnvelope } from '@kcm/protocol';
import { buildManager, type Manager } from '../../src/app';
import { parseManagerConfig } from '../../src/config';
import { CommandKind, type Command } from '../../src/meta/commands';
import type { MachineType } from '../../src/meta/state';
import type { Clock } from '../../src/meta/store';
import { testSecretsKeyFile } from '../../../../test/helpers/secrets';
import { authHeader, testTokenConfig } from '../../../../test/helpers/tokens';

export interface InProcessManager {
  manager: Manager;
  /** One Emit through the gateway (fastify inject, no socket). */
  /** POSTs an envelope with the test admin token, or with `headers` when given. */
  emit(body: unknown, headers?: Record<string, string>): Promise<{ status: number; reply: ReplyEnvelope }>;
  /** Commits a command as a job step would (to set up machines and clusters). */
  commit(cmd: Command): Promise<void>;
  /** Registers a machine, as a finished create_machine would, with ports portLow..portLow+999. */
  registerMachine(hostaddr: string, machineType?: MachineType, portLow?: number): Promise<void>;
  close(): Promise<void>;
}

/** A free TCP port on `host`, found by binding port 0. */
async function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export interface InProcessOptions {
  /** The manager's clock (buildManager's `clock`). Default: Date.now. */
  clock?: Clock;
  /** Keep the leader services running once it leads, so accepted jobs run. Default: false. */
  leaderServices?: boolean;
  /** More manager config (limits, ...) over the helper's own. */
  config?: Record<string, unknown>;
}

export async function startInProcessManager(opts: InProcessOptions = {}): Promise<InProcessManager> {
  // An address of its own: system tests bind fixed ports on 127.0.1.x and 127.0.2.x.
  const host = `127.0.99.${1 + Math.floor(Math.random() * 250)}`;
  const raftPort = await freePort(host);
  const member = `${host}:${raftPort - 1}`; // the Raft transport listens on the member's port + 1
  // dataDir is never read: the Raft log is in memory.
  const config = parseManagerConfig({ member, dataDir: '/nonexistent/kcm-in-process', agentPort: 1, tickMs: 20, electionTick: 10, logLevel: 'silent', tokens: testTokenConfig(), secretsKeyFile: testSecretsKeyFile(), ...opts.config });
  const manager = await buildManager(config, { logger: createLogger({ name: 'manager', level: 'silent' }), storage: MemoryStorage.bootstrap([member]), clock: opts.clock });
  const close = async () => {
    await manager.stop().catch(() => {});
  };
  try {
    const deadline = Date.now() + 20_000;
    while (!manager.leadership.isLeader) {
      if (Date.now() > deadline) throw new Error('the one-member manager did not become leader in 20 s');
      await new Promise((r) => setTimeout(r, 20));
    }
    if (!opts.leaderServices) await manager.leadership.update(false, manager.raft.status().term);
  } catch (err) {
    await close();
    throw err;
  }
  const commit = async (cmd: Command) => {
    const outcome = await manager.store.propose(cmd);
    if (!outcome.ok) throw new Error(`${outcome.refusal}: ${outcome.message}`);
  };
  return {
    manager,
    async emit(body, headers = authHeader()) {
      const response = await manager.gateway.inject({
        method: 'POST',
        url: '/HttpService/Emit',
        headers: { 'content-type': 'application/json', ...headers },
        payload: JSON.stringify(body),
      });
      return { status: response.statusCode, reply: response.json() as ReplyEnvelope };
    },
    commit,
    registerMachine(hostaddr, machineType = 'storage', portLow = 57000) {
      return commit({
        kind: CommandKind.MachineRegistered, at: 1_700_000_000_000, hostaddr, machineType, portLow, portHigh: portLow + 999, rackId: 'r1',
        datadir: '/kunlun/data', logdir: '/kunlun/log', walLogDir: '/kunlun/wal', compDatadir: '/kunlun/comp', totalMemMb: 8192, totalCpuCores: 8, facts: null,
      });
    },
    close,
  };
}
