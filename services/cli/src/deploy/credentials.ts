// The deployment's secrets, made once on the deploying machine and kept in global.deploy_dir
// (mode 0700): the CA and its key (ca/), each host's certificate (ca/certs/), the admin token
// (admin.token; the managers get only its SHA-256) and the secrets key's master copy
// (secrets.key; every manager gets a copy). The same code as `kcm local up` (local/
// admin-token.ts, local/secrets-key.ts, @kcm/agent-api's openssl issuer): a re-run reuses
// all of it, so certificates and tokens do not change under running hosts.

import { chmodSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ensureCa, issueCert } from '@kcm/agent-api';
import { ensureAdminToken, adminTokenPath, tokenSha256 } from '../local/admin-token';
import { ensureSecretsKey } from '../local/secrets-key';
import type { Credentials } from './host-plan';
import type { TopologyFile } from './topology-file';

export interface DeployDirFiles {
  dir: string;
  caPem: string;
  adminToken: string;
  secretsKey: string;
}

export function deployDirFiles(dir: string): DeployDirFiles {
  return { dir, caPem: path.join(dir, 'ca', 'ca.pem'), adminToken: adminTokenPath(dir), secretsKey: path.join(dir, 'secrets.key') };
}

/** Certificate file stem of a host's role: manager-10.0.0.11, agent-10.0.0.21. */
const certName = (role: 'manager' | 'agent', host: string) => `${role}-${host.replace(/[^A-Za-z0-9.-]/g, '_')}`;

export async function ensureCredentials(topology: TopologyFile): Promise<{ credentials: Credentials; files: DeployDirFiles; token: string }> {
  const files = deployDirFiles(topology.global.deploy_dir);
  mkdirSync(files.dir, { recursive: true, mode: 0o700 });
  chmodSync(files.dir, 0o700);
  const ca = ensureCa(path.join(files.dir, 'ca'), `/CN=kcm ${topology.name} CA`);
  const token = await ensureAdminToken(files.dir);
  await ensureSecretsKey(files.secretsKey);
  const certs = path.join(files.dir, 'ca', 'certs');
  const credentials: Credentials = {
    caPem: readFileSync(ca.cert),
    secretsKey: readFileSync(files.secretsKey),
    adminTokenSha256: tokenSha256(token),
    certificate(role, host) {
      const issued = issueCert(ca, certs, { name: certName(role, host), role, hosts: [host] });
      return { cert: readFileSync(issued.cert), key: readFileSync(issued.key) };
    },
  };
  return { credentials, files, token };
}
