// Loads an agent .proto from the repository's proto/ folder at run time (no generated code
// to go stale), with the decoding options every agent service uses: field names as written,
// 64-bit integers as numbers, enums as their names, defaults filled, repeated fields always
// arrays. The TypeScript shapes in contract/ state what these options decode; the contract
// test checks them against the .proto files.

import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { assetPath } from '@kcm/common';

export const AGENT_PROTO_OPTIONS: protoLoader.Options = { keepCase: true, longs: Number, enums: String, defaults: true, arrays: true };

/** The agent protos, by file name under proto/. */
export const AGENT_PROTO_FILES = ['agent.proto', 'agent-mariadb.proto', 'agent-postgres.proto', 'agent-cgroup.proto', 'agent-mariadb-ha.proto', 'agent-storage.proto', 'agent-mariadb-restore.proto', 'agent-mariadb-logical.proto', 'agent-mariadb-tables.proto', 'agent-table-move.proto', 'agent-shard-data.proto', 'agent-passwords.proto', 'agent-host-probe.proto', 'agent-shard-routing.proto'] as const;

export function agentProtoPath(protoFile: string): string {
  return assetPath('proto', protoFile);
}

export function loadAgentService(protoFile: string, serviceName: string): grpc.ServiceClientConstructor {
  const definition = protoLoader.loadSync(agentProtoPath(protoFile), AGENT_PROTO_OPTIONS);
  const loaded = grpc.loadPackageDefinition(definition) as unknown as { kcm: { agent: Record<string, grpc.ServiceClientConstructor> } };
  const service = loaded.kcm.agent[serviceName];
  if (!service) throw new Error(`${protoFile} defines no service kcm.agent.${serviceName}`);
  return service;
}
