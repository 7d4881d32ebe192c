// Every capability module the agent serves besides the base Agent service (agent.proto).
// Add a module here when it has its own .proto service.

import type { CapabilityModule } from '../capability';

export const capabilityModules: CapabilityModule[] = [];
