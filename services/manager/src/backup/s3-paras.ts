// create_backup_storage's stype s3 (docs/backup-s3.md): the checks across paras (each para's
// own format is checked by the schema, libs/protocol/src/paras/s3-storage-fields.ts), the
// secret key sealed before the paras enter the log, and the record kept in the replicated
// state. The agent gets the opened secret only inside its Open call (backup/storage.ts).

import { DEFAULT_S3_REGION, KcmError, S3_PARAS, S3_REQUIRED_PARAS, type ParasOf } from '@kcm/protocol';
import type { S3Target } from '@kcm/agent-api';
import type { S3StorageRecord } from '../meta/state';
import type { SecretBox } from '../secrets/secret-box';

type CreateParas = ParasOf<'create_backup_storage'>;

/** stype s3 needs endpoint, bucket and both credentials; stype fs takes none of the s3 paras. */
export function checkS3Paras(p: CreateParas): void {
  const given = (name: (typeof S3_PARAS)[number]) => p[name] !== undefined;
  if (p.stype === 's3') {
    const missing = S3_REQUIRED_PARAS.find((name) => !given(name));
    if (missing) throw KcmError.of('INVALID_PARAS', `paras.${missing}: required for stype s3 (endpoint, bucket, access_key_id and secret_access_key are)`, { field: `paras.${missing}` });
  } else {
    const extra = S3_PARAS.find(given);
    if (extra) throw KcmError.of('INVALID_PARAS', `paras.${extra}: only stype s3 takes it (stype is ${p.stype})`, { field: `paras.${extra}` });
  }
}

/** The paras as committed: the secret key sealed (every member holds the key that opens it). */
export function sealS3Paras(p: CreateParas, box: SecretBox): CreateParas {
  return p.secret_access_key === undefined ? p : { ...p, secret_access_key: box.seal(p.secret_access_key) };
}

/** The record's s3 part, from paras whose secret is sealed already (sealS3Paras). */
export function s3RecordOf(p: CreateParas): { s3?: S3StorageRecord } {
  if (p.stype !== 's3') return {};
  return {
    s3: { endpoint: p.endpoint!, bucket: p.bucket!, prefix: p.prefix ?? '', region: p.region ?? DEFAULT_S3_REGION, accessKeyId: p.access_key_id!, sealedSecretAccessKey: p.secret_access_key! },
  };
}

/** What the storage host's agent needs to reach the bucket: the secret opened for this one call. */
export function s3TargetOf(record: S3StorageRecord, box: SecretBox): S3Target {
  return { endpoint: record.endpoint, region: record.region, bucket: record.bucket, prefix: record.prefix, access_key_id: record.accessKeyId, secret_access_key: box.open(record.sealedSecretAccessKey) };
}
