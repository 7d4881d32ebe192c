// kcm-agent: `kcm-agent --host 127.0.2.1 --port 58100` (from the repository:
// `tsx services/agent/src/main.ts ...`). Flags and KCM_AGENT_* variables: command-line.ts.
// Every mistake in them is one line on stderr naming the flag or variable, exit 2; a failure
// to start from them (credentials, an address in use) one line, exit 1; never a stack trace.

import { createLogger, createShutdown, exitWithConfigError, runCommandLine, useOwnerOnlyUmask } from '@kcm/common';
import { startTls } from '@kcm/agent-api';
import { AGENT_COMMAND } from './command-line';
import { tuneHeapForTransfers } from './heap-tuning';
import { startAgent } from './server';

const PROGRAM = AGENT_COMMAND.program;
const values = runCommandLine(AGENT_COMMAND) as Record<string, string | undefined> & { insecure: boolean };

useOwnerOnlyUmask();
tuneHeapForTransfers();

const logger = createLogger({ name: 'agent', base: { host: values.host } });
// Credentials first: no port is bound before they are loaded and checked.
try {
  startTls({ role: 'agent', files: { ca: values['tls-ca'], cert: values['tls-cert'], key: values['tls-key'] }, insecure: values.insecure, warn: (m) => logger.warn(m) });
} catch (err) {
  exitWithConfigError(PROGRAM, err);
}
let agent;
try {
  agent = await startAgent({
    hostaddr: values.host!,
    port: Number(values.port),
    logger,
    stateDir: values['state-dir'],
    engineCacheDir: values['engine-cache'],
    engineDefaults: { mariadb: values['mariadb-version'], postgres: values['postgres-version'] },
    metricsPort: values['metrics-port'] !== undefined ? Number(values['metrics-port']) : Number(values.port) + 2,
  });
} catch (err) {
  if (process.env.KCM_LOG_LEVEL === 'debug' && err instanceof Error) process.stderr.write(`${err.stack}\n`);
  exitWithConfigError(PROGRAM, err);
}
const shutdown = createShutdown(logger);
shutdown.add('agent grpc server', () => agent.stop());
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => void shutdown.run(signal).then(() => process.exit(0)));
}
