// `kcm local up` registers one backup storage, so a newcomer can back up right away: a
// directory under the deployment (`<dir>/backups`) served by the first local agent. Done
// through the Emit API like any client would (create_backup_storage), once: a storage
// already registered (an `up` after a `down`, or one made by hand) is left as it is.

import path from 'node:path';
import { createEmitClient } from '../http-client';
import { localEnvelope, waitForLocalJob } from './local-jobs';

export const LOCAL_STORAGE_NAME = 'local';

export interface LocalStorageTarget {
  /** A manager URL (followers forward to the leader). */
  url: string;
  hostaddr: string;
  agentPort: number;
  deploymentDir: string;
  fetch?: typeof fetch;
  /** The deployment's admin token (create_backup_storage needs the admin role). */
  token?: string;
  /** The local CA (the managers serve HTTPS). */
  ca?: string | Buffer;
  timeoutMs?: number;
}

/** A line for the operator: what is registered, or why it is not (never fatal for `up`). */
export async function registerLocalBackupStorage(t: LocalStorageTarget): Promise<string> {
  const client = createEmitClient({ url: t.url, fetch: t.fetch, ca: t.ca, timeoutMs: 10_000, token: t.token });
  const deadline = Date.now() + (t.timeoutMs ?? 60_000);
  const dir = path.join(t.deploymentDir, 'backups');
  try {
    const listed = (await client.emit(localEnvelope('get_backup_storage', {}))).reply;
    const storages = ((listed.attachment ?? {}) as { list_backup_storage?: { name: string; hostaddr: string; port: string }[] }).list_backup_storage ?? [];
    if (listed.error_code === '0' && storages.length > 0) return `backup storage: ${storages.map((s) => `${s.name} (${s.hostaddr}:${s.port})`).join(', ')}`;
    // The same request_id on every `up`: a retry never registers a second one.
    const paras = { name: LOCAL_STORAGE_NAME, stype: 'fs', hostaddr: t.hostaddr, port: String(t.agentPort), path: dir };
    const ack = (await client.emit(localEnvelope('create_backup_storage', paras, { request_id: `kcm-local-backup-storage-${t.hostaddr}` }))).reply;
    if (ack.error_code !== '0') return `backup storage not registered: ${ack.error_info}`;
    const status = await waitForLocalJob(client, ack, deadline);
    if (status.status === 'done') return `backup storage: ${LOCAL_STORAGE_NAME}, ${dir} on ${t.hostaddr} (full backups: kcm emit manual_backup_cluster)`;
    if (status.status === 'failed') return `backup storage not registered: ${status.error_info}`;
    return `backup storage not registered yet: job ${ack.job_id} is still ${status.status}`;
  } catch (err) {
    return `backup storage not registered: ${err instanceof Error ? err.message : String(err)}`;
  }
}
