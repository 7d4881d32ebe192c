// create_backup_storage stype s3 on the manager side (backup/s3-paras.ts): the checks across
// paras naming the field, the secret key sealed before the paras are committed, the record
// holding only the sealed secret, and the agent's target opening it for one call.

import { describe, expect, it } from 'vitest';
import type { KcmError, ParasOf } from '@kcm/protocol';
import { checkS3Paras, s3RecordOf, s3TargetOf, sealS3Paras } from '../../src/backup/s3-paras';
import { createBackupStorageJob } from '../../src/jobs/backup-storage';
import { testSecretBox } from '../../../../test/helpers/secrets';

type Paras = ParasOf<'create_backup_storage'>;
const S3 = { name: 'b', stype: 's3', hostaddr: '10.0.0.9', port: 58100, path: '/spool', endpoint: 'http://10.0.0.5:9000', bucket: 'kcm-backups', access_key_id: 'AKID', secret_access_key: 'the-secret-key' } as unknown as Paras;
const refusal = (p: Paras) => {
  try {
    checkS3Paras(p);
    return undefined;
  } catch (err) {
    return `${(err as KcmError).name} ${(err as KcmError).message}`;
  }
};

describe('create_backup_storage stype s3, manager side', () => {
  it('stype s3 names the first missing para; stype fs refuses any s3 para', () => {
    expect(refusal(S3)).toBeUndefined();
    expect(refusal({ ...S3, endpoint: undefined })).toMatch(/paras\.endpoint: required for stype s3/);
    expect(refusal({ ...S3, secret_access_key: undefined })).toMatch(/paras\.secret_access_key: required for stype s3/);
    expect(refusal({ ...S3, stype: 'fs', endpoint: undefined, access_key_id: undefined, secret_access_key: undefined } as Paras)).toMatch(/paras\.bucket: only stype s3 takes it \(stype is fs\)/);
  });

  it('the job seals the secret before its paras are committed; the record keeps it sealed; the agent target opens it', () => {
    const box = testSecretBox();
    const job = createBackupStorageJob(() => {
      throw new Error('not opened here');
    });
    const sealed = job.sealParas!(S3, box);
    expect(sealed.secret_access_key).toMatch(/^kcm-sealed:v1:/);
    expect(JSON.stringify(sealed)).not.toContain('the-secret-key');
    expect(sealS3Paras({ ...S3, stype: 'fs', secret_access_key: undefined } as Paras, box).secret_access_key).toBeUndefined();
    const { s3 } = s3RecordOf(sealed);
    expect(s3).toMatchObject({ endpoint: 'http://10.0.0.5:9000', bucket: 'kcm-backups', prefix: '', region: 'us-east-1', accessKeyId: 'AKID' });
    expect(JSON.stringify(s3)).not.toContain('the-secret-key');
    expect(s3TargetOf(s3!, box)).toMatchObject({ bucket: 'kcm-backups', access_key_id: 'AKID', secret_access_key: 'the-secret-key' });
  });
});
