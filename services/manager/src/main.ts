// kcm-manager: `kcm-manager --config /etc/kcm/manager-m1.json` (from the repository:
// `tsx services/manager/src/main.ts ...`).
//   --restore-meta <backup>: first seed this member of a brand-new group from a metadata
//   backup (manual_backup_cluster -1; see backup/restore-meta.ts), then start as usual.
// Every mistake in the flags or the config is one line on stderr naming the flag or key, exit
// 2 (command line) or 1 (configuration, credentials, start-up), never a stack trace.

import { createLogger, createShutdown, exitWithConfigError, runCommandLine, useOwnerOnlyUmask, type CommandSpec } from '@kcm/common';
import { startTls } from '@kcm/agent-api';
import { buildManager } from './app';
import { loadManagerConfig } from './config';
import { restoreMetaInto } from './backup/restore-meta';

useOwnerOnlyUmask();

const PROGRAM = 'kcm-manager';
const COMMAND: CommandSpec = {
  program: PROGRAM,
  summary: 'one member of the kcm manager group (Raft metadata, Emit API and console, job runner)',
  synopsis: '--config <file.json> [--insecure] [--restore-meta <backup>]',
  envPrefix: 'KCM_MANAGER_',
  options: {
    config: { type: 'string', value: '<file.json>', env: 'KCM_MANAGER_CONFIG', help: "this member's configuration (deploy/config/manager-m1.json)" },
    insecure: { type: 'boolean', help: 'plaintext internal links and Emit without tokens (warned about on every start)' },
    'restore-meta': { type: 'string', value: '<backup>', help: 'first seed this brand-new member from a metadata backup (a file or kcm-fs://host:port/path?key=K)' },
  },
};

const values = runCommandLine(COMMAND);
if (typeof values.config !== 'string') {
  process.stderr.write(`${PROGRAM}: --config <file.json> is required (or KCM_MANAGER_CONFIG); see ${PROGRAM} --help\n`);
  process.exit(2);
}

let loaded;
try {
  loaded = loadManagerConfig(values.config);
} catch (err) {
  exitWithConfigError(PROGRAM, err);
}
const config = { ...loaded, ...(values.insecure ? { insecure: true } : {}) };
// Credentials first: nothing binds (Raft, forwarding, gateway) before they are loaded and checked.
try {
  startTls({ role: 'manager', files: config.tls, insecure: config.insecure, warn: (m) => createLogger({ name: 'manager', base: { member: config.member } }).warn(m) });
} catch (err) {
  exitWithConfigError(PROGRAM, err);
}
if (typeof values['restore-meta'] === 'string') {
  try {
    await restoreMetaInto(config, values['restore-meta'], createLogger({ name: 'manager', level: config.logLevel, base: { member: config.member } }));
  } catch (err) {
    exitWithConfigError(PROGRAM, new Error(`--restore-meta failed: ${err instanceof Error ? err.message : String(err)}`));
  }
}
// What fails here is the configuration meeting the host (a secrets key file that is missing or
// readable by others, an address in use): one line too. KCM_LOG_LEVEL=debug also prints the stack.
let manager;
try {
  manager = await buildManager(config);
  await manager.listen();
} catch (err) {
  if (process.env.KCM_LOG_LEVEL === 'debug' && err instanceof Error) process.stderr.write(`${err.stack}\n`);
  exitWithConfigError(PROGRAM, err);
}

const shutdown = createShutdown(manager.logger);
shutdown.add('manager', () => manager.stop());
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => void shutdown.run(signal).then(() => process.exit(0)));
}
