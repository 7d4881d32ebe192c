// kcm-agent: `tsx services/agent/src/main.ts --host 127.0.2.1 --port 58100`

import { parseArgs } from 'node:util';
import { createLogger, createShutdown, useOwnerOnlyUmask } from '@kcm/common';
import { startAgent } from './server';

useOwnerOnlyUmask();

const { values } = parseArgs({
  options: {
    host: { type: 'string', default: process.env.KCM_AGENT_HOST ?? '127.0.0.1' },
    port: { type: 'string', default: process.env.KCM_AGENT_PORT ?? '58100' },
    'state-dir': { type: 'string', default: process.env.KCM_AGENT_STATE_DIR },
  },
});

const logger = createLogger({ name: 'agent', base: { host: values.host } });
const agent = await startAgent({ hostaddr: values.host!, port: Number(values.port), logger, stateDir: values['state-dir'] });
const shutdown = createShutdown(logger);
shutdown.add('agent grpc server', () => agent.stop());
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => void shutdown.run(signal).then(() => process.exit(0)));
}
