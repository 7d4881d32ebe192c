// The s3 roots this agent was asked to open: `s3://<endpoint host>/<bucket>/<prefix>` ->
// the bucket and its credentials. Kept in memory only (the secret key never touches this
// host's disk and is never logged); an agent restart forgets them and the manager opens the
// root again before its next call (an unknown root is FAILED_PRECONDITION saying so).

import { AgentFailure, type S3Target } from '@kcm/agent-api';
import { S3ObjectStore } from './s3-store';

const S3_ROOT = 's3://';
const BUCKET = /^(?!xn--)(?!.*\.\.)(?!\d+\.\d+\.\d+\.\d+$)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const PREFIX = /^(?:[A-Za-z0-9_=-][A-Za-z0-9._=-]{0,199})(?:\/[A-Za-z0-9_=-][A-Za-z0-9._=-]{0,199}){0,7}$/;

const opened = new Map<string, S3ObjectStore>();
let spoolRoot = '';

export function isS3Root(root: string): boolean {
  return typeof root === 'string' && root.startsWith(S3_ROOT);
}

/** The root that names a target: the same target always gives the same root. */
export function s3RootOf(t: Pick<S3Target, 'endpoint' | 'bucket' | 'prefix'>): string {
  return `${S3_ROOT}${new URL(t.endpoint).host}/${t.bucket}${t.prefix ? `/${t.prefix}` : ''}`;
}

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

/** Where multipart uploads spool their parts: the agent's state directory (set once at registration). */
export function setSpoolRoot(dir: string): void {
  spoolRoot = dir;
}

/** Opens (or re-opens with new credentials) the s3 root of `target`; returns its store. */
export function openS3Root(root: string, target: S3Target): S3ObjectStore {
  const checked = checkTarget(target);
  if (root !== s3RootOf(checked)) throw new AgentFailure('invalid_argument', `root ${JSON.stringify(root)} does not name bucket ${checked.bucket} at ${checked.endpoint} (expected ${s3RootOf(checked)})`);
  if (!spoolRoot) throw new AgentFailure('failed_precondition', 'this agent has no spool directory for s3 uploads');
  opened.get(root)?.close();
  const store = new S3ObjectStore(root, checked, spoolRoot);
  opened.set(root, store);
  return store;
}

export function s3StoreOf(root: string): S3ObjectStore {
  const store = opened.get(root);
  if (!store) throw new AgentFailure('failed_precondition', `s3 storage ${root} was not opened on this agent since it started: the manager opens it again (Open with its bucket) before using it`);
  return store;
}
