// The local group's secrets key: 32 random bytes made once (mode 0600) under the deployment
// directory and named by every manager's config, so generated database passwords are
// sealed in the Raft log and state from the first cluster on. Kept across `down`/`up`
// (the state sealed with it must still open); `down --purge` removes it with the rest.

import { randomBytes } from 'node:crypto';
import { chmod, writeFile } from 'node:fs/promises';
import path from 'node:path';

export const secretsKeyPath = (deploymentDir: string): string => path.join(deploymentDir, 'secrets.key');

export async function ensureSecretsKey(file: string): Promise<void> {
  try {
    await writeFile(file, randomBytes(32), { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  await chmod(file, 0o600);
}
