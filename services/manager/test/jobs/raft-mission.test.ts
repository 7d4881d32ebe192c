// raft_mission add_peer against a real RaftNode (libs/raft, one member, MemoryStorage)
// whose network reaches nobody: the learner it adds never answers, as when add_peer names
// a host where no manager runs. The job runs through the real runner.

import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { MemoryStorage, RaftNode, type StateMachine } from '@kcm/raft';
import { registryOf } from '../../src/jobs/registry';
import { JobRunner } from '../../src/jobs/framework/runner';
import { raftMissionJob } from '../../src/jobs/raft-mission';
import { ManagerService } from '../../src/submit/manager-service';
import { LocalStore, until } from '../helpers/local-store';
import { stepServices } from '../helpers/step-services';
import { request } from './grow-harness';
import { testSecretBox } from '../../../../test/helpers/secrets';

const SELF = '127.0.1.91:58001';
const NOBODY = '127.0.1.99:58001';

/** The manager's metadata is in the LocalStore here; the Raft log only carries membership. */
class NoState implements StateMachine {
  private applied = 0;
  apply(entries: { index: number }[]): unknown[] {
    this.applied = entries.at(-1)?.index ?? this.applied;
    return entries.map(() => undefined);
  }
  snapshot(): Uint8Array {
    return new Uint8Array();
  }
  restore(_data: Uint8Array, meta: { index: number }): void {
    this.applied = meta.index;
  }
  appliedIndex(): number {
    return this.applied;
  }
}

let raft: RaftNode | undefined;
let runner: JobRunner | undefined;

afterEach(async () => {
  await runner?.stop();
  await raft?.stop();
});

async function setUp(catchUpTimeoutMs: number) {
  raft = await RaftNode.start({
    id: SELF,
    storage: MemoryStorage.bootstrap([SELF]),
    stateMachine: new NoState(),
    transport: { start: async () => {}, stop: async () => {}, send: () => {}, onMessage: () => {}, onUnreachable: () => {}, onSnapshotStatus: () => {} },
    tickMs: 5,
    electionTick: 10,
  });
  await until(() => raft!.status().leader === SELF);
  const store = new LocalStore();
  const definition = raftMissionJob({ raft, catchUpTimeoutMs });
  const registry = registryOf({ raft_mission: definition });
  runner = new JobRunner(store, registry, stepServices(store));
  const service = new ManagerService({ store, registry, queries: new Map(), linearizableRead: async () => {}, secrets: testSecretBox(), onSubmitted: () => runner!.notify() });
  runner.start();
  const run = async (paras: Record<string, string>) => {
    const { jobId } = await service.submitJob(request('raft_mission', paras));
    await until(() => ['done', 'failed'].includes(store.s.jobs[jobId].status), catchUpTimeoutMs + 5000);
    return service.getStatus(jobId);
  };
  return { raft, definition, run };
}

describe('raft_mission add_peer', () => {
  it('a learner that never catches up is removed again when the job fails, and the error says so', async () => {
    const { raft, run } = await setUp(600);
    const status = await run({ task_type: 'add_peer', peer: NOBODY });
    expect(status).toMatchObject({ status: 'failed', errorCode: 2002 });
    expect(raft.status().conf).toMatchObject({ voters: [SELF], learners: [] });
    expect(status.errorInfo).toBe(
      `step 2 of 2 (catch up and promote) failed: learner ${NOBODY} did not catch up within 600 ms; is it running?; learner ${NOBODY} was removed again`,
    );
  });

  it('a catch-up step resumed after the learner was removed fails without adding it back', async () => {
    const { raft, definition } = await setUp(600);
    const [, catchUp] = definition.steps({ task_type: 'add_peer', peer: NOBODY } as never);
    const ctx = { signal: new AbortController().signal, progress: async () => {} } as never;
    await expect(catchUp.run(ctx)).rejects.toThrow(`paras.peer: ${NOBODY} is no longer a learner: it was removed after it failed to catch up`);
    expect(raft.status().conf).toMatchObject({ voters: [SELF], learners: [] });
  });
});
