// The s3 storages this agent was asked to open. An s3 storage's root is a directory on this
// host (the storage's registered path) where its uploads spool their parts; Open brings the
// bucket and its credentials, which this agent keeps in memory only (the secret key never
// touches this host's disk and is never logged). Open also leaves a marker file in the root
// (no secrets: endpoint, bucket, prefix), so that after an agent restart a request for the
// root is refused (UNAVAILABLE: open it again) instead of treating the spool as an fs storage.

import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AgentFailure, type S3Target } from '@kcm/agent-api';
import { checkRoot } from '../object-store';
import { S3ObjectStore } from './s3-store';

const BUCKET = /^(?!xn--)(?!.*\.\.)(?!\d+\.\d+\.\d+\.\d+$)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const PREFIX = /^(?:[A-Za-z0-9_=-][A-Za-z0-9._=-]{0,199})(?:\/[A-Za-z0-9_=-][A-Za-z0-9._=-]{0,199}){0,7}$/;
const MARKER = '.kcm-s3-storage.json';

const opened = new Map<string, S3ObjectStore>();

/** Checks what the manager sent (it validated the paras already: this guards the agent's own use). */
export function checkTarget(t: S3Target): S3Target {
  let url: URL;
  try {
    url = new URL(t.endpoint);
  } catch {
    throw new AgentFailure('invalid_argument', `s3.endpoint ${JSON.stringify(t.endpoint)} is not a URL`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || (url.pathname !== '/' && url.pathname !== '') || url.search || url.username) {
    throw new AgentFailure('invalid_argument', `s3.endpoint ${JSON.stringify(t.endpoint)} must be http(s)://host[:port] with no path`);
  }
  if (!BUCKET.test(t.bucket)) throw new AgentFailure('invalid_argument', `s3.bucket ${JSON.stringify(t.bucket)} is not an S3 bucket name`);
  if (t.prefix !== '' && !PREFIX.test(t.prefix)) throw new AgentFailure('invalid_argument', `s3.prefix ${JSON.stringify(t.prefix)} must be '/'-separated segments of [A-Za-z0-9._=-]`);
  if (!t.access_key_id || !t.secret_access_key) throw new AgentFailure('invalid_argument', 's3.access_key_id and s3.secret_access_key are required');
  return { ...t, region: t.region || 'us-east-1' };
}

/** Opens (or re-opens with new credentials) the s3 storage of `root` (its spool directory); returns its store. */
export async function openS3Root(root: string, target: S3Target): Promise<S3ObjectStore> {
  const dir = checkRoot(root);
  const checked = checkTarget(target);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await writeFile(path.join(dir, MARKER), JSON.stringify({ endpoint: checked.endpoint, bucket: checked.bucket, prefix: checked.prefix }), { mode: 0o600 });
  // The manager opens before each storage object's first call: the same bucket and credentials
  // keep the store (an upload under way goes on with its client); other ones replace it for
  // later calls, and the old client is left to finish what it is doing, never destroyed here.
  const existing = opened.get(dir);
  if (existing && JSON.stringify(existing.target) === JSON.stringify(checked)) return existing;
  const store = new S3ObjectStore(dir, checked);
  opened.set(dir, store);
  return store;
}

/** The opened s3 store of root; undefined for a root that is no s3 storage; refused for one not opened since this agent started. */
export function s3StoreOf(root: string): S3ObjectStore | undefined {
  const dir = typeof root === 'string' ? root.replace(/\/+$/, '') : root;
  const store = opened.get(dir);
  if (store) return store;
  if (typeof root === 'string' && path.isAbsolute(root) && existsSync(path.join(dir, MARKER))) {
    throw new AgentFailure('unavailable', `s3 storage ${dir} was not opened on this agent since it started: the manager opens it again (Open with its bucket) before using it`);
  }
  return undefined;
}
