// The local deployment's admin token: made by the first `kcm local up`, kept in
// <dir>/admin.token (mode 0600, readable by its owner only), and given to the managers'
// config only as its SHA-256. Every later `kcm` command finds it there when neither
// --token nor KCM_TOKEN is given, so a local group is closed and yet needs no extra step.

import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { chmod, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

export const ADMIN_TOKEN_FILE = 'admin.token';
/** The token's name in the managers' config: what job records and the audit trail show. */
export const LOCAL_ADMIN_TOKEN_NAME = 'local-admin';

/** A new token: 256 random bits (see services/manager/src/gateway/auth.ts for why SHA-256 of it is enough). */
export function newToken(): string {
  return `kcm_${randomBytes(32).toString('base64url')}`;
}

export function tokenSha256(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export function adminTokenPath(dir: string): string {
  return path.join(dir, ADMIN_TOKEN_FILE);
}

/** The deployment's admin token, made (0600) when it has none yet; the same one on every later `up`. */
export async function ensureAdminToken(dir: string): Promise<string> {
  const file = adminTokenPath(dir);
  try {
    const existing = (await readFile(file, 'utf8')).trim();
    if (existing !== '') {
      await chmod(file, 0o600);
      return existing;
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const token = newToken();
  await writeFile(file, `${token}\n`, { mode: 0o600 });
  await chmod(file, 0o600); // writeFile's mode is filtered by the umask
  return token;
}

/** The token stored in a deployment directory, or undefined when there is none (or it cannot be read). */
export function readAdminToken(dir: string): string | undefined {
  try {
    const token = readFileSync(adminTokenPath(dir), 'utf8').trim();
    return token === '' ? undefined : token;
  } catch {
    return undefined;
  }
}
