// Soak of the move catch-up (npm run soak:catch-up): the move of test/cluster/move-catch-up.test.ts
// whose catch-up crosses three binlog rotations (writes between) and an idle spell, 20 times
// in a row, the table moved back and forth between the two shards. Each run must finish, cut
// over at or past the source's position after the idle spell, and leave every row on the
// destination as the writes made it. Prints the runs passed, the catch-up time from the
// release of the hold (until the last write before the last rotation is on the destination,
// and until the job ended) and the rotations each catch-up crossed.
//
// A one-member manager on 127.0.1.62, agents on port 58162 (no other test file uses them).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { atOrPastPosition, moveAcrossRotations, seededRows, startCatchUpCluster, type CatchUpCluster } from './move-catch-up-scenario';

const MEMBER = '127.0.1.62:58162';
const AGENT_PORT = 58162;
const RUNS = Number(process.env.KCM_SOAK_RUNS ?? 20);
const ROWS = 3_000;

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

describe(`the move catch-up across three rotations and an idle spell, ${RUNS} moves in a row`, () => {
  let c: CatchUpCluster;

  beforeAll(async () => {
    c = await startCatchUpCluster({ agentPort: AGENT_PORT, member: MEMBER });
  }, 400_000);

  afterAll(async () => {
    await c?.close();
  }, 120_000);

  it('every move finishes, cuts over past the idle source position and leaves every row on the destination', async () => {
    const [a, b] = c.shards();
    await c.seedTable(a, 'cu_soak', ROWS);
    const expected = seededRows(ROWS);
    let at = a;
    const lines: string[] = [];
    const passed: { catchUpMs: number; doneMs: number; rotations: number }[] = [];
    const failures: string[] = [];
    for (let run = 1; run <= RUNS; run++) {
      const to = at === a ? b : a;
      const started = Date.now();
      const out = await moveAcrossRotations(c, 'cu_soak', at, to, expected, { idleMs: 3_000, round: run });
      const ok = out.status === 'done' && out.rotationsCrossed >= 3 && out.cutOverAt !== null && atOrPastPosition(out.cutOverAt, out.endAfterIdle) && out.differences.length === 0 && out.rows === expected.size;
      const line = `run ${run}: shard ${at} -> ${to} ${ok ? 'ok' : 'FAILED'}; rotations ${out.rotationsCrossed}; catch-up ${out.catchUpMs} ms, job end ${out.doneMs} ms after the release; cut over at ${out.cutOverAt?.file}:${out.cutOverAt?.pos} (source ${out.endAfterIdle.file}:${out.endAfterIdle.pos}); ${out.rows} rows, ${out.differences.length} differ; move ${Date.now() - started} ms${out.error ? `; ${out.error}` : ''}`;
      console.log(line);
      lines.push(line);
      if (ok) {
        passed.push({ catchUpMs: out.catchUpMs, doneMs: out.doneMs, rotations: out.rotationsCrossed });
        at = to;
      } else {
        failures.push(line);
        // A failed move leaves the table at its source (its target is dropped): the next run starts from there again.
        if (out.status === 'done') at = to;
      }
    }
    const catchUp = passed.map((p) => p.catchUpMs);
    const done = passed.map((p) => p.doneMs);
    const rotations = passed.map((p) => p.rotations);
    console.log(
      [
        `move catch-up soak: ${passed.length} of ${RUNS} runs passed`,
        `catch-up after the release (last write before the last rotation on the destination): p50 ${percentile(catchUp, 50)} ms, max ${Math.max(...catchUp)} ms`,
        `job end after the release (catch-up past the last rotation, verify, cut-over): p50 ${percentile(done, 50)} ms, max ${Math.max(...done)} ms`,
        `rotations crossed per catch-up: min ${Math.min(...rotations)}, max ${Math.max(...rotations)}, total ${rotations.reduce((x, y) => x + y, 0)}`,
      ].join('\n'),
    );
    expect(failures).toEqual([]);
  }, 900_000);
});
