// kcm-manager: `tsx services/manager/src/main.ts --config /etc/kcm/manager.json`

import { parseArgs } from 'node:util';
import { createShutdown } from '@kcm/common';
import { buildManager } from './app';
import { loadManagerConfig } from './config';

const { values } = parseArgs({ options: { config: { type: 'string', default: process.env.KCM_MANAGER_CONFIG } } });
if (!values.config) {
  process.stderr.write('usage: kcm-manager --config <file.json>   (or KCM_MANAGER_CONFIG)\n');
  process.exit(2);
}

const manager = await buildManager(loadManagerConfig(values.config));
await manager.listen();

const shutdown = createShutdown(manager.logger);
shutdown.add('manager', () => manager.stop());
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => void shutdown.run(signal).then(() => process.exit(0)));
}
