// Loads proto/agent-host-probe.proto at run time and states its message shapes as
// proto-loader decodes them (keepCase, longs as numbers, defaults filled; an unset message
// field is null). The HostProbeAgent service: every named instance of one host measured in
// one call, each exactly as its own probe answers.

import { loadAgentService } from '../load-proto';
import type { MariaDbProbeReply } from './mariadb';
import type { ProbePostgresReply } from './postgres';

export const HostProbeAgentService = loadAgentService('agent-host-probe.proto', 'HostProbeAgent');

export interface ProbeHostRequest {
  mariadb_ports: number[];
  postgres_ports: number[];
}

export interface HostMariaDbProbe {
  port: number;
  /** null when the probe failed (then `error`). */
  probe: MariaDbProbeReply | null;
  error: string;
}

export interface HostPostgresProbe {
  port: number;
  /** null when the probe failed (then `error`). */
  probe: ProbePostgresReply | null;
  error: string;
}

export interface ProbeHostReply {
  mariadb: HostMariaDbProbe[];
  postgres: HostPostgresProbe[];
}
