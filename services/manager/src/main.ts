// kcm-manager: `tsx services/manager/src/main.ts --config /etc/kcm/manager.json`
//   --restore-meta <backup>: first seed this member of a brand-new group from a metadata
//   backup (manual_backup_cluster -1; see backup/restore-meta.ts), then start as usual.

import { parseArgs } from 'node:util';
import { createLogger, createShutdown, useOwnerOnlyUmask } from '@kcm/common';
import { startTls } from '@kcm/agent-api';
import { buildManager } from './app';
import { loadManagerConfig } from './config';
import { restoreMetaInto } from './backup/restore-meta';

useOwnerOnlyUmask();

const { values } = parseArgs({
  options: { config: { type: 'string', default: process.env.KCM_MANAGER_CONFIG }, 'restore-meta': { type: 'string' }, insecure: { type: 'boolean', default: false } },
});
if (!values.config) {
  process.stderr.write('usage: kcm-manager --config <file.json> [--insecure] [--restore-meta <file | kcm-fs://host:port/path?key=K>]   (or KCM_MANAGER_CONFIG)\n');
  process.exit(2);
}

// --insecure: plaintext internal links and Emit without tokens (each warned about on every start).
const config = { ...loadManagerConfig(values.config), ...(values.insecure ? { insecure: true } : {}) };
// Credentials first: nothing binds (Raft, forwarding, gateway) before they are loaded and checked.
try {
  startTls({ role: 'manager', files: config.tls, insecure: config.insecure, warn: (m) => createLogger({ name: 'manager', base: { member: config.member } }).warn(m) });
} catch (err) {
  process.stderr.write(`kcm-manager: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
if (values['restore-meta']) {
  try {
    await restoreMetaInto(config, values['restore-meta'], createLogger({ name: 'manager', level: config.logLevel, base: { member: config.member } }));
  } catch (err) {
    process.stderr.write(`kcm-manager: --restore-meta failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
const manager = await buildManager(config);
await manager.listen();

const shutdown = createShutdown(manager.logger);
shutdown.add('manager', () => manager.stop());
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => void shutdown.run(signal).then(() => process.exit(0)));
}
