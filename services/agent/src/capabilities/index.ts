// Every capability module the agent serves besides the base Agent service (agent.proto).
// Add a module here when it has its own .proto service.

import type { CapabilityModule } from '../capability';
import { postgresCapability } from './postgres/index';
import { cgroupCapability } from './cgroup/index';
import { mariadbModule } from './mariadb/index';
import { storageCapability } from './storage/index';
import { mariadbLogicalModule } from './mariadb/logical/logical';
import { mariadbTablesModule } from './mariadb/tables/table-info';
import { tableMoveCapability } from './table-move/index';
import { relationSwitchCapability } from './table-move/parent-switch';
import { passwordsCapability } from './passwords/index';
import { hostProbeCapability } from './host-probe/index';
import { shardDataCapability } from './shard-data/index';
import { shardRoutingCapability } from './shard-routing/index';

export const capabilityModules: CapabilityModule[] = [
  postgresCapability,
  cgroupCapability,
  mariadbModule,
  storageCapability,
  mariadbLogicalModule,
  mariadbTablesModule,
  tableMoveCapability,
  relationSwitchCapability,
  passwordsCapability,
  hostProbeCapability,
  shardDataCapability,
  shardRoutingCapability,
];
