// Shared set-up of the real-engine MariaDB tests: three in-process agents on 127.0.2.1-3,
// a temp folder mysql can traverse, a captured log, a sampler of spawned command lines,
// and a cleanup that kills every mariadbd started under the temp folder even on failure.

import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createLogger } from '@kcm/common';
import { startAgent, type RunningAgent } from '../../src/index';
import { MariaDbAgentClient } from '@kcm/agent-api';
import type { MariaDbInstallRequest, MariaDbInstanceSpec } from '@kcm/agent-api';

export const HOSTS = ['127.0.2.1', '127.0.2.2', '127.0.2.3'] as const;
export const AGENT_PORT = 57190;

export const secrets = {
  admin: { user: 'kcm_agent', password: 'adm-Pw-7c1e0b9f-"quote\'s' },
  replication: { user: 'kcm_repl', password: 'repl-Pw-52d3aa61' },
  storage: { user: 'kcm_storage', password: 'stor-Pw-9e8f77b0' },
};
export const allSecretValues = [secrets.admin.password, secrets.replication.password, secrets.storage.password];

export interface ShardFixture {
  tmp: string;
  agents: RunningAgent[];
  clients: MariaDbAgentClient[];
  logLines: string[];
  /** Command lines of MariaDB tools seen in /proc while the tests ran. */
  seenCommandLines: Set<string>;
  spec(port: number, serverId: number): MariaDbInstanceSpec;
  installRequest(opId: string, port: number, serverId: number): MariaDbInstallRequest;
  /** Stops agent i and starts a fresh one on the same address and state dir (an agent restart). */
  restartAgent(i: number): Promise<void>;
  close(): Promise<void>;
}

export async function startShardFixture(): Promise<ShardFixture> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'kcm-mariadb-'));
  await chmod(tmp, 0o755); // mariadbd runs as mysql and must reach its directories
  const logLines: string[] = [];
  const logger = createLogger({ name: 'agent', level: 'debug', destination: { write: (line: string) => void logLines.push(line) } });
  const launch = (host: string) => startAgent({ hostaddr: host, port: AGENT_PORT, logger: logger.child({ host }), stateDir: path.join(tmp, `agent-${host}`) });
  const agents: RunningAgent[] = [];
  try {
    for (const host of HOSTS) agents.push(await launch(host));
  } catch (err) {
    await Promise.all(agents.map((a) => a.stop()));
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
  const clients = agents.map((a) => new MariaDbAgentClient(a.address));
  const seenCommandLines = new Set<string>();
  const sampler = startCommandLineSampler(seenCommandLines);
  const spec = (port: number, serverId: number): MariaDbInstanceSpec => ({
    port,
    datadir: path.join(tmp, 'data'),
    logdir: path.join(tmp, 'log'),
    wal_log_dir: path.join(tmp, 'wal'),
    server_id: serverId,
    innodb_size_mb: 64,
    max_connections: 100,
    dbcfg: 1,
    fullsync_level: 1,
  });
  return {
    tmp,
    agents,
    clients,
    logLines,
    seenCommandLines,
    spec,
    installRequest: (opId, port, serverId) => ({ op_id: opId, spec: spec(port, serverId), ...secrets, storage_db_patterns: [] }),
    restartAgent: async (i) => {
      clients[i].close();
      await agents[i].stop();
      agents[i] = await launch(HOSTS[i]);
      clients[i] = new MariaDbAgentClient(agents[i].address);
    },
    close: async () => {
      sampler.stop();
      if (process.env.KCM_TEST_DUMP_LOG) await writeFile(process.env.KCM_TEST_DUMP_LOG, logLines.join(""));
      for (const c of clients) c.close();
      // Agents first: their supervisors would restart what is killed while they run.
      await Promise.all(agents.map((a) => a.stop()));
      await killServersUnder(tmp);
      await rm(tmp, { recursive: true, force: true });
    },
  };
}

/**
 * Polls /proc for MariaDB tool processes and records their command lines. One pass at a
 * time, and each pid is read once: the agents under test share this event loop and the
 * libuv thread pool, and must not be starved by their observer.
 */
export function startCommandLineSampler(into: Set<string>): { stop(): void } {
  const readPids = new Set<string>();
  let stopped = false;
  const pass = async () => {
    for (const pid of await readdir('/proc').catch(() => [] as string[])) {
      if (!/^\d+$/.test(pid) || readPids.has(pid)) continue;
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      if (!cmdline) {
        readPids.add(pid); // kernel thread or zombie: never a tool we wait for
        continue;
      }
      // A forked child shows its parent's argv until it execs: read it again next pass.
      if (!cmdline.includes('node')) readPids.add(pid);
      if (/mariadb|mbstream|mariabackup/.test(cmdline)) into.add(cmdline.split('\0').join(' ').trim());
    }
  };
  const loop = async () => {
    while (!stopped) {
      await pass();
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  void loop();
  return { stop: () => void (stopped = true) };
}

/** SIGKILLs every mariadbd whose command line names a file under dir (only what this test started). */
export async function killServersUnder(dir: string): Promise<void> {
  for (const pid of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes('mariadbd') && cmdline.includes(dir)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}
