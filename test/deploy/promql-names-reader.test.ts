// The PromQL reader behind the metric-name check: a reader that missed names would let a
// dashboard with a typo pass, so its own cases are checked here.
import { describe, expect, it } from 'vitest';
import { metricNamesIn } from './promql-names';

describe('metricNamesIn', () => {
  it.each([
    ['max(kcm_raft_is_leader{group="kcm"}) < 1', ['kcm_raft_is_leader']],
    ['histogram_quantile(0.99, sum by (le, job_type) (rate(kcm_emit_request_duration_seconds_bucket{outcome!="ok"}[5m])))', ['kcm_emit_request_duration_seconds_bucket']],
    ['max(kcm_raft_commit_index) - min(kcm_raft_applied_index) > 1000', ['kcm_raft_commit_index', 'kcm_raft_applied_index']],
    ['count(kcm_agent_reachable == 0) or vector(0)', ['kcm_agent_reachable']],
    ['kcm_typo_metric and on (instance) up', ['kcm_typo_metric', 'up']],
  ])('%s', (expr, names) => {
    expect(metricNamesIn(expr)).toEqual(names);
  });
});
