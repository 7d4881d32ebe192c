// kcm-agent's command line: each flag, the KCM_AGENT_* variable behind it (what
// /etc/kcm/agent.env sets for the unit), and the checks a value must pass before anything
// binds. A KCM_AGENT_* variable that is none of these is refused by name: a misspelt
// KCM_AGENT_TLS_CRT would otherwise leave the agent without its certificate, or a default
// silently in force.

import { checkPort, type CommandSpec } from '@kcm/common';
import { VERSION_EXAMPLE, versionFormatProblem, type EngineKind } from './capabilities/engines/engine-versions';

/** The rule an install's own version para follows (engine-versions.ts). */
const version = (kind: EngineKind, engine: string) => (value: string) =>
  versionFormatProblem(kind, value) ? `must be a ${engine} version like ${VERSION_EXAMPLE[kind]}` : undefined;

export const AGENT_COMMAND: CommandSpec = {
  program: 'kcm-agent',
  summary: "the kcm agent of one database host (installs and operates its MariaDB and PostgreSQL instances)",
  synopsis: '[--host <address>] [--port <port>] [--state-dir <dir>] [--tls-ca <file> --tls-cert <file> --tls-key <file> | --insecure]',
  envPrefix: 'KCM_AGENT_',
  options: {
    host: { type: 'string', value: '<address>', env: 'KCM_AGENT_HOST', default: '127.0.0.1', help: "this host's address: the agent listens there and managers call it there" },
    port: { type: 'string', value: '<port>', env: 'KCM_AGENT_PORT', default: '58100', check: checkPort, help: 'gRPC port every manager is configured with (agentPort); the data plane listens on port + 1' },
    'state-dir': { type: 'string', value: '<dir>', env: 'KCM_AGENT_STATE_DIR', help: "the agent's own records (instances, op ledger)" },
    // Mutual TLS (libs/agent-api/src/tls): the cluster CA bundle and this agent's `agent`-role certificate and key.
    'tls-ca': { type: 'string', value: '<file>', env: 'KCM_AGENT_TLS_CA', help: 'the cluster CA bundle' },
    'tls-cert': { type: 'string', value: '<file>', env: 'KCM_AGENT_TLS_CERT', help: "this host's agent-role certificate (its SANs name --host)" },
    'tls-key': { type: 'string', value: '<file>', env: 'KCM_AGENT_TLS_KEY', help: 'its private key' },
    insecure: { type: 'boolean', env: 'KCM_AGENT_INSECURE', help: 'plaintext gRPC and no data plane: throw-away setups only (warned about on every start)' },
    // The host-wide engine cache (docs/engine-versions.md) and the versions an install naming none gets
    // (default: the versions of the system-installed Debian packages).
    'engine-cache': { type: 'string', value: '<dir>', env: 'KCM_AGENT_ENGINE_CACHE', help: 'the host-wide cache of engine builds' },
    'mariadb-version': { type: 'string', value: '<x.y.z>', env: 'KCM_AGENT_MARIADB_VERSION', check: version('mariadb', 'MariaDB'), help: 'the MariaDB build an install naming none gets [default: the installed package]' },
    'postgres-version': { type: 'string', value: '<x.y>', env: 'KCM_AGENT_POSTGRES_VERSION', check: version('postgres', 'PostgreSQL'), help: 'the PostgreSQL build an install naming none gets [default: the installed package]' },
    // Plain-HTTP /metrics on the host address (docs/agent-metrics.md); default the gRPC port + 2.
    'metrics-port': { type: 'string', value: '<port>', env: 'KCM_AGENT_METRICS_PORT', check: checkPort, help: 'plain-HTTP /metrics port [default: --port + 2]' },
  },
  notes: ['Each flag may instead be set by its variable, e.g. in /etc/kcm/agent.env for kcm-agent.service; a flag wins.'],
};
