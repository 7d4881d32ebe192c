// kcm_build_info: which release and protocol each member runs, the Prometheus *_build_info way
// (a constant 1 carrying them as labels), so a dashboard shows a rolling upgrade's two builds.

import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { KCM_PROTOCOL, KCM_VERSION } from '@kcm/common';
import { createManagerMetrics } from '../src/metrics';
import { emptyMetaState } from '../src/meta/state';

describe('kcm_build_info', () => {
  it('is 1 with this build\'s version and protocol as labels', async () => {
    const registry = new Registry();
    createManagerMetrics(registry, { raft: () => undefined, state: () => emptyMetaState(), health: () => undefined });
    const lines = (await registry.getSingleMetricAsString('kcm_build_info')).split('\n');
    expect(lines).toContain(`kcm_build_info{version="${KCM_VERSION}",protocol="${KCM_PROTOCOL}"} 1`);
    expect(lines.filter((line) => line.startsWith('kcm_build_info{'))).toHaveLength(1);
  });
});
