import { describe, expect, it } from 'vitest';
import type { MariaDbHaStatusReply } from '@kcm/agent-api';
import { chooseCandidate, type StandbySurvey } from '../../src/jobs/shard-ha/choose-candidate';
import type { StorageNodeRecord } from '../../src/meta/state';

const node = (id: string, fenced = false): StorageNodeRecord => ({ id, hostaddr: `h${id}`, port: 57000 + Number(id), serverId: 1, datadir: '', logdir: '', walLogDir: '', ...(fenced ? { fenced: { since: 0, byJob: '1', reason: 'old master' } } : {}) });
const status = (slave: string, io: string, acker: boolean): MariaDbHaStatusReply =>
  ({ answering: true, running: true, installed: true, gtid_slave_pos: slave, gtid_current_pos: slave, gtid_io_pos: io, semi_sync_slave_active: acker, fenced: false }) as MariaDbHaStatusReply;

describe('choosing the standby to promote', () => {
  it('takes the one furthest once its relay log is applied (received GTIDs count)', () => {
    const surveys: StandbySurvey[] = [
      { node: node('2'), status: status('0-1-10', '0-1-12', true), problem: '' },
      { node: node('3'), status: status('0-1-11', '0-1-13', false), problem: '' },
    ];
    expect(chooseCandidate(surveys)).toMatchObject({ node_id: '3', gtid: '0-1-13' });
  });

  it('counts only what a standby applied when its SQL thread has stopped: it cannot apply what it received', () => {
    const stopped = { ...status('0-1-100', '0-1-7777', true), is_replica: true, sql_running: false, last_sql_error: 'Error 1397 XAER_NOTA' } as MariaDbHaStatusReply;
    const healthy = { ...status('0-1-7000', '0-1-7000', false), is_replica: true, sql_running: true, last_sql_error: '' } as MariaDbHaStatusReply;
    const surveys: StandbySurvey[] = [
      { node: node('2'), status: stopped, problem: '' },
      { node: node('3'), status: healthy, problem: '' },
    ];
    expect(chooseCandidate(surveys)).toMatchObject({ node_id: '3', gtid: '0-1-7000' });
  });

  it('prefers a semi-sync acker among equals, and never a fenced old master or one that does not answer', () => {
    const surveys: StandbySurvey[] = [
      { node: node('2'), status: status('0-1-12', '', false), problem: '' },
      { node: node('3'), status: status('0-1-12', '', true), problem: '' },
      { node: node('4', true), status: status('0-1-40', '', true), problem: '' },
      { node: node('5'), problem: 'agent unreachable' },
    ];
    expect(chooseCandidate(surveys)).toMatchObject({ node_id: '3', semi_sync_acker: true });
  });

  it('among standbys that will reach the same position, takes the one with the least relay log left to apply (it takes writes soonest)', () => {
    const surveys: StandbySurvey[] = [
      { node: node('2'), status: status('0-1-4000', '0-1-9000', true), problem: '' }, // just re-attached: 5000 to apply
      { node: node('3'), status: status('0-1-8990', '0-1-9000', true), problem: '' },
    ];
    expect(chooseCandidate(surveys)).toMatchObject({ node_id: '3', gtid: '0-1-9000' });
  });

  it('refuses with NO_RESOURCES when no standby can be promoted, naming why', () => {
    expect(() => chooseCandidate([{ node: node('2'), problem: 'agent unreachable' }])).toThrow(/no standby can be promoted: h2:57002 agent unreachable/);
  });
});
