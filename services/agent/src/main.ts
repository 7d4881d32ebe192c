// kcm-agent: `tsx services/agent/src/main.ts --host 127.0.2.1 --port 58100`

import { parseArgs } from 'node:util';
import { createLogger, createShutdown, useOwnerOnlyUmask } from '@kcm/common';
import { startTls } from '@kcm/agent-api';
import { tuneHeapForTransfers } from './heap-tuning';
import { startAgent } from './server';

useOwnerOnlyUmask();
tuneHeapForTransfers();

const { values } = parseArgs({
  options: {
    host: { type: 'string', default: process.env.KCM_AGENT_HOST ?? '127.0.0.1' },
    port: { type: 'string', default: process.env.KCM_AGENT_PORT ?? '58100' },
    'state-dir': { type: 'string', default: process.env.KCM_AGENT_STATE_DIR },
    // Mutual TLS (libs/agent-api/src/tls): the cluster CA bundle and this agent's `agent`-role certificate and key.
    'tls-ca': { type: 'string', default: process.env.KCM_AGENT_TLS_CA },
    'tls-cert': { type: 'string', default: process.env.KCM_AGENT_TLS_CERT },
    'tls-key': { type: 'string', default: process.env.KCM_AGENT_TLS_KEY },
    insecure: { type: 'boolean', default: process.env.KCM_AGENT_INSECURE === '1' },
    // The host-wide engine cache (docs/engine-versions.md) and the versions an install naming none gets
    // (default: the versions of the system-installed Debian packages).
    'engine-cache': { type: 'string', default: process.env.KCM_AGENT_ENGINE_CACHE },
    'mariadb-version': { type: 'string', default: process.env.KCM_AGENT_MARIADB_VERSION },
    'postgres-version': { type: 'string', default: process.env.KCM_AGENT_POSTGRES_VERSION },
    // Plain-HTTP /metrics on the host address (docs/agent-metrics.md); default the gRPC port + 2.
    'metrics-port': { type: 'string', default: process.env.KCM_AGENT_METRICS_PORT },
  },
});

const logger = createLogger({ name: 'agent', base: { host: values.host } });
// Credentials first: no port is bound before they are loaded and checked.
try {
  startTls({ role: 'agent', files: { ca: values['tls-ca'], cert: values['tls-cert'], key: values['tls-key'] }, insecure: values.insecure!, warn: (m) => logger.warn(m) });
} catch (err) {
  process.stderr.write(`kcm-agent: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
const agent = await startAgent({
  hostaddr: values.host!,
  port: Number(values.port),
  logger,
  stateDir: values['state-dir'],
  engineCacheDir: values['engine-cache'],
  engineDefaults: { mariadb: values['mariadb-version'], postgres: values['postgres-version'] },
  metricsPort: values['metrics-port'] !== undefined ? Number(values['metrics-port']) : Number(values.port) + 2,
});
const shutdown = createShutdown(logger);
shutdown.add('agent grpc server', () => agent.stop());
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => void shutdown.run(signal).then(() => process.exit(0)));
}
