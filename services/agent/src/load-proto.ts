// Loads an agent .proto from the repository's proto/ folder at run time (no generated code
// to go stale), with the decoding options every agent service uses: field names as written,
// 64-bit integers as numbers, defaults filled, repeated fields always arrays.

import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export function loadAgentService(protoFile: string, serviceName: string): grpc.ServiceClientConstructor {
  const protoPath = fileURLToPath(new URL(`../../../proto/${protoFile}`, import.meta.url));
  const definition = protoLoader.loadSync(protoPath, { keepCase: true, longs: Number, enums: String, defaults: true, arrays: true });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as { kcm: { agent: Record<string, grpc.ServiceClientConstructor> } };
  const service = loaded.kcm.agent[serviceName];
  if (!service) throw new Error(`${protoFile} defines no service kcm.agent.${serviceName}`);
  return service;
}
