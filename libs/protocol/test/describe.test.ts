import { describe, expect, it } from 'vitest';
import { describeJob, JOB_TYPES, JOB_MODES, parseRequest, type ParaDescription } from '../src/index';
import { loadFixture } from './fixtures';

const flatten = (paras: ParaDescription[], prefix = ''): { path: string; para: ParaDescription }[] =>
  paras.flatMap((p) => [{ path: prefix + p.name, para: p }, ...flatten(p.items ?? [], `${prefix}${p.name}[0].`)]);

describe('describeJob (help text from the schemas)', () => {
  it('describes every job type: mode, summary, and a description and rule for every para', () => {
    for (const jobType of JOB_TYPES) {
      const d = describeJob(jobType);
      expect(d.mode).toBe(JOB_MODES[jobType]);
      expect(d.summary.length, jobType).toBeGreaterThan(5);
      for (const { path, para } of flatten(d.paras)) {
        expect(para.description, `${jobType} ${path}`).not.toBe('');
        expect(para.rule, `${jobType} ${path}`).not.toBe('');
      }
    }
  });

  it('marks a para required exactly when leaving it out of the fixture is rejected', () => {
    const mismatches: string[] = [];
    for (const jobType of JOB_TYPES) {
      for (const { path, para } of flatten(describeJob(jobType).paras)) {
        const body = loadFixture(jobType);
        const keys = path.split(/\[0\]\./);
        let holder: Record<string, unknown> = body.paras;
        for (const key of keys.slice(0, -1)) holder = (holder[key] as Record<string, unknown>[] | undefined)?.[0] ?? {};
        if (!(keys[keys.length - 1] in holder)) continue; // not in the fixture: nothing to leave out
        delete holder[keys[keys.length - 1]];
        const accepted = parseRequest(body).ok;
        if (accepted === para.required) mismatches.push(`${jobType} ${path}: required=${para.required}, accepted without it=${accepted}`);
      }
    }
    // Optional in the schema but needed by a cross-field rule (stated in the job's notes):
    // one of two forms (logical_restore, a cluster by name or id) or required by task_type (raft_mission) or type (set_noswitch).
    expect(mismatches.sort()).toEqual([
      'delete_cluster cluster_id: required=false, accepted without it=false',
      'get_cluster_detail cluster_name: required=false, accepted without it=false',
      'logical_restore restore: required=false, accepted without it=false',
      'raft_mission target_leader: required=false, accepted without it=false',
      'set_noswitch timeout: required=false, accepted without it=false',
    ]);
  });

  it('resolves aliases and answers undefined for unknown job types', () => {
    expect(describeJob('delete_shard')?.jobType).toBe('delete_shards');
    expect(describeJob('delete_shards').aliases).toEqual(['delete_shard']);
    expect(describeJob('no_such_job')).toBeUndefined();
  });

  it('shows defaults as sent on the wire and the rules of cross-field checks', () => {
    const cluster = describeJob('create_cluster');
    expect(cluster.paras.find((p) => p.name === 'install_proxysql')).toMatchObject({ required: false, default: '0', rule: '0|1' });
    expect(cluster.paras.find((p) => p.name === 'nodes')).toMatchObject({ required: true, rule: 'integer string >= 3' });
    expect(cluster.notes).toContain('fullsync_level <= nodes - 1');
    expect(describeJob('expand_cluster').paras.find((p) => p.name === 'drop_old_table')).toMatchObject({ default: '0' });
  });
});
