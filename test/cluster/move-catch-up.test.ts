// The move catch-up on real engines (issue 36: "the catch-up sometimes never finishes"): a
// one-member manager on 127.0.1.63, three agents on port 58163, a cluster of 2 shards x 3
// MariaDB nodes and 1 compute node (scenarios in soak/move-catch-up-scenario.ts, which the
// soak repeats).
//
// - The reported case: expand_cluster of three tables with no load, the source's binlog
//   rotated after the start positions were recorded (as the binlog archiver does) and idle
//   after. It failed `catch-up did not reach mariadb-bin.000002:389 ... (applied up to
//   mariadb-bin.000002:344)`: mariadb-binlog kept the new file's first events in its stdio
//   buffer while nothing more was written.
// - A move whose catch-up crosses three rotations with writes between and then an idle
//   spell, all while the catch-up runs; its cut-over waits for the position after the last
//   rotation.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { atOrPastPosition, expandThreeTablesWithNoLoad, moveAcrossRotations, seededRows, startCatchUpCluster, type CatchUpCluster } from './soak/move-catch-up-scenario';

const MEMBER = '127.0.1.63:58163';
const AGENT_PORT = 58163;

describe('the move catch-up reaches the source position across rotations and idle spells (2 shards x 3 nodes, 1 compute node)', () => {
  let c: CatchUpCluster;

  beforeAll(async () => {
    c = await startCatchUpCluster({ agentPort: AGENT_PORT, member: MEMBER });
  }, 400_000);

  afterAll(async () => {
    await c?.close();
  }, 120_000);

  it('expand_cluster of three tables with no load finishes when the source binlog rotated after the start and stayed idle', async () => {
    const out = await expandThreeTablesWithNoLoad(c, ['cu_student', 'cu_ss', 'cu_test1'], 1_000);
    console.log(`no-load expand: ${JSON.stringify(out)}`);
    expect(out.error).toBe('');
    expect(out.status).toBe('done');
    // The catch-up had to go past the rotation: every start is in an older file than the end it reached.
    for (const start of out.starts) expect(atOrPastPosition(start, { file: out.end.file, pos: 4 })).toBe(false);
    // Every row on the destination shard, equal to the source's (renamed aside).
    expect(out.differing).toEqual([]);
  }, 400_000);

  it('a move whose catch-up crosses three rotations with writes between and an idle spell finishes and verifies', async () => {
    const [src, dst] = c.shards();
    await c.seedTable(src, 'cu_rot', 3_000);
    const expected = seededRows(3_000);
    const out = await moveAcrossRotations(c, 'cu_rot', src, dst, expected, { idleMs: 3_000, round: 1 });
    console.log(`rotation move: ${JSON.stringify({ ...out, differences: out.differences.slice(0, 5) })}`);
    expect(out.error).toBe('');
    expect(out.status).toBe('done');
    expect(out.rotationsCrossed).toBeGreaterThanOrEqual(3);
    // The cut-over applied up to the source's end after the last rotation and the idle spell.
    expect(out.cutOverAt).not.toBeNull();
    expect(atOrPastPosition(out.cutOverAt!, out.endAfterIdle)).toBe(true);
    // Every row on the destination as the writes left it; the compute node reads it there.
    expect(out.differences).toEqual([]);
    expect(out.rows).toBe(expected.size);
    expect(await c.foreignServer('cu_rot')).toBe(`shard_${dst}`);
  }, 400_000);
});
