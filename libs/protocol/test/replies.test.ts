import { describe, expect, it } from 'vitest';
import {
  acceptReply,
  canonicalJobType,
  doneReply,
  errorReply,
  JOB_MODES,
  JOB_TYPE_ALIASES,
  JOB_TYPES,
  KcmError,
  parseRequest,
  statusReply,
  type ReplyEnvelope,
} from '../src/index';
import { loadFixture } from './fixtures';

/** Spec 2.2: exactly these fields, all strings but attachment. */
function expectEnvelopeShape(reply: ReplyEnvelope): void {
  expect(Object.keys(reply).sort()).toEqual(['attachment', 'error_code', 'error_info', 'job_id', 'job_type', 'status', 'version']);
  for (const key of ['version', 'error_code', 'error_info', 'status', 'job_id', 'job_type'] as const) expect(typeof reply[key]).toBe('string');
  expect(reply.version).toBe('1.0');
}

describe('reply builders (spec 2.2)', () => {
  it('acknowledge an async job with status accept, the job id and a null attachment', () => {
    const reply = acceptReply('17', 'create_cluster');
    expectEnvelopeShape(reply);
    expect(reply).toEqual({ version: '1.0', error_code: '0', error_info: '', status: 'accept', job_id: '17', job_type: 'create_cluster', attachment: null });
  });

  it('answer a sync query with status done, no job id and the result', () => {
    const reply = doneReply('get_meta_mode', { mode: 'mgr' });
    expectEnvelopeShape(reply);
    expect(reply).toMatchObject({ error_code: '0', status: 'done', job_id: '', attachment: { mode: 'mgr' } });
  });

  it('report a job through get_status with its code as a decimal string', () => {
    const reply = statusReply({ jobId: '9', sentJobType: 'delete_shard', status: 'failed', errorCode: 2002, errorInfo: 'step stop_instances timed out', attachment: null });
    expectEnvelopeShape(reply);
    expect(reply).toMatchObject({ error_code: '2002', status: 'failed', job_id: '9', job_type: 'delete_shard' });
  });

  it('turn a KcmError into a failed reply carrying its code and message', () => {
    const reply = errorReply(KcmError.of('NOT_FOUND', 'cluster 5 does not exist'), 'delete_cluster');
    expectEnvelopeShape(reply);
    expect(reply).toEqual({ version: '1.0', error_code: '1005', error_info: 'cluster 5 does not exist', status: 'failed', job_id: '', job_type: 'delete_cluster', attachment: null });
    expect(errorReply(KcmError.of('BAD_JSON', 'body: is not valid JSON')).job_type).toBe('');
  });
});

describe('job type aliases', () => {
  it('map each alias the spec examples send to its canonical job type', () => {
    expect(JOB_TYPE_ALIASES).toEqual({
      delete_shard: 'delete_shards',
      delete_node: 'delete_nodes',
      table_repartition: 'repartition_tables',
      get_meta_summary: 'get_meta_mode',
    });
    for (const jobType of JOB_TYPES) expect(canonicalJobType(jobType)).toBe(jobType);
    expect(canonicalJobType('toString')).toBeUndefined();
    expect(canonicalJobType('DELETE_SHARD')).toBeUndefined();
  });

  for (const [alias, canonical] of Object.entries(JOB_TYPE_ALIASES)) {
    it(`${alias}: resolves to ${canonical}, and the reply echoes ${alias}`, () => {
      const body = { ...loadFixture(canonical), job_type: alias };
      const result = parseRequest(body);
      if (!result.ok) throw result.error;
      expect(result.request.jobType).toBe(canonical);
      expect(result.request.sentJobType).toBe(alias);
      const reply = JOB_MODES[canonical] === 'async' ? acceptReply('1', result.request.sentJobType) : doneReply(result.request.sentJobType, {});
      expect(reply.job_type).toBe(alias);
    });
  }

  it('make queries and get_status sync, manual_backup_cluster async', () => {
    const sync = JOB_TYPES.filter((t) => JOB_MODES[t] === 'sync').sort();
    expect(sync).toEqual(
      ['get_status', 'get_meta_mode', 'get_backup_storage', 'get_machine_summary', 'get_cluster_summary', 'get_cluster_detail', 'get_variable', 'get_expand_table_list', 'list_tokens', 'get_audit', 'list_jobs'].sort(),
    );
    expect(JOB_MODES.manual_backup_cluster).toBe('async');
  });
});
