/**
 * The paras of a backup storage of stype `s3` (docs/backup-s3.md): an S3-compatible bucket
 * that the storage host's kcm agent (hostaddr:port) writes to. Each is optional in the schema
 * and required (or refused) by stype in create_backup_storage's own check, which names the
 * field. The secret key is sealed before the paras enter the replicated log and never shown.
 */
import { z } from 'zod';
import { fieldRules, formatted, type Parsed } from '../formats';

const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const broken = (rule: string): Parsed<never> => ({ ok: false, rule });

/** `http(s)://host[:port]`, no path, query or user info. */
export function parseS3Endpoint(s: string): Parsed<string> {
  let url: URL;
  try {
    url = new URL(s);
  } catch {
    return broken('must be a URL: http(s)://host[:port]');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return broken('must start with http:// or https://');
  if (url.username || url.password) return broken('must not carry credentials (use access_key_id and secret_access_key)');
  if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) return broken('must be http(s)://host[:port] with no path, query or fragment');
  return ok(s.replace(/\/+$/, ''));
}

/** S3's bucket naming rules: 3-63 of [a-z0-9.-], starting and ending with a letter or digit, no `..`, not an IP address, not `xn--`. */
export function parseBucketName(s: string): Parsed<string> {
  if (s.length < 3 || s.length > 63) return broken('must be 3-63 characters');
  if (!/^[a-z0-9][a-z0-9.-]*[a-z0-9]$/.test(s)) return broken('must be lowercase letters, digits, . and -, starting and ending with a letter or digit');
  if (s.includes('..')) return broken('must not contain ..');
  if (/^\d+\.\d+\.\d+\.\d+$/.test(s)) return broken('must not look like an IP address');
  if (s.startsWith('xn--') || s.endsWith('-s3alias')) return broken('must not start with xn-- or end with -s3alias');
  return ok(s);
}

/** Up to 8 `/`-separated segments of [A-Za-z0-9._=-] (not starting with .), no leading or trailing `/`. */
export function parseS3Prefix(s: string): Parsed<string> {
  if (s === '') return ok(s);
  const segments = s.split('/');
  if (segments.length > 8 || segments.some((g) => !/^[A-Za-z0-9_=-][A-Za-z0-9._=-]{0,199}$/.test(g))) {
    return broken('must be at most 8 /-separated segments of [A-Za-z0-9._=-], none empty or starting with ., no leading or trailing /');
  }
  return ok(s);
}

export function parseS3Region(s: string): Parsed<string> {
  return /^[a-z0-9-]{1,32}$/.test(s) ? ok(s) : broken('must be 1-32 of [a-z0-9-], e.g. us-east-1');
}

export function parseAccessKeyId(s: string): Parsed<string> {
  return /^[A-Za-z0-9._~+/=-]{3,128}$/.test(s) ? ok(s) : broken('must be 3-128 printable characters with no spaces');
}

/** Never echoed back: a refusal says what is wrong, not what was sent. */
export function parseSecretAccessKey(s: string): Parsed<string> {
  return /^[\x21-\x7e]{3,256}$/.test(s) ? ok(s) : broken('must be 3-256 printable ASCII characters with no spaces');
}

/** The default region when none is given (what S3-compatible servers accept). */
export const DEFAULT_S3_REGION = 'us-east-1';

/** Like `formatted`, but a refusal does not quote what was sent: the error must not carry the secret. */
function secretString() {
  const schema = z.string().superRefine((s, ctx) => {
    const r = parseSecretAccessKey(s);
    // zod would quote the value sent; the issue names a stand-in instead.
    if (!r.ok) ctx.addIssue({ code: 'custom', message: r.rule, input: '<secret not shown>' });
  });
  fieldRules.add(schema, { rule: 'S3 secret access key' });
  return schema;
}

export const s3StorageFields = {
  /** stype s3: the S3-compatible service, http(s)://host[:port]. */
  endpoint: formatted(parseS3Endpoint, 'http(s)://host[:port]').optional(),
  /** stype s3: the bucket (S3 naming rules); it must exist. */
  bucket: formatted(parseBucketName, 'S3 bucket name').optional(),
  /** stype s3: a key prefix inside the bucket (default: none). */
  prefix: formatted(parseS3Prefix, '/-separated key prefix').optional(),
  /** stype s3: default us-east-1. */
  region: formatted(parseS3Region, 'S3 region, e.g. us-east-1').optional(),
  access_key_id: formatted(parseAccessKeyId, 'S3 access key id').optional(),
  /** Sealed before it enters the replicated state; never logged or returned. */
  secret_access_key: secretString().optional(),
};

/** The s3 para names, in the order a refusal lists them. */
export const S3_REQUIRED_PARAS = ['endpoint', 'bucket', 'access_key_id', 'secret_access_key'] as const;
export const S3_PARAS = ['endpoint', 'bucket', 'prefix', 'region', 'access_key_id', 'secret_access_key'] as const;
