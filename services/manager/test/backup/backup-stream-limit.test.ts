// The full backup's stream limit by default (manager config backupPvLimitMb): none, so
// mariabackup writes straight into zstd and no agent touches the uncompressed bytes. A limit
// is still honoured when configured (relayed by the source agent at that rate, on the shard's
// own bytes), at the CPU cost measured in bench/backup/README.md ("Stream limit").

import { describe, expect, it } from 'vitest';
import { parseManagerConfig } from '../../src/config';

const base = { member: '127.0.0.1:7000', dataDir: '/tmp/kcm-limit-test', agentPort: 1 };

describe('the full backup stream limit', () => {
  it('is none (0) unless configured: the default stream is piped straight into zstd', () => {
    expect(parseManagerConfig(base).backupPvLimitMb).toBe(0);
  });

  it('keeps a configured limit, and refuses one that is not a whole number of MB/s >= 0', () => {
    expect(parseManagerConfig({ ...base, backupPvLimitMb: 100 }).backupPvLimitMb).toBe(100);
    expect(() => parseManagerConfig({ ...base, backupPvLimitMb: -1 })).toThrow(/backupPvLimitMb/);
    expect(() => parseManagerConfig({ ...base, backupPvLimitMb: 2.5 })).toThrow(/backupPvLimitMb/);
  });
});
