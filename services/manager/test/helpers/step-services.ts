// What job steps act through, for tests that run jobs on a LocalStore: proposals go to the
// store; agents are the given fakes, or ones nothing answers (port 1) for jobs that call none.

import { silentLogger, type Logger } from '@kcm/common';
import { AgentPool, type WithAgent, type Agents } from '@kcm/agent-api';
import type { StepServices } from '../../src/jobs/framework/workflow';
import type { MetaStore } from '../../src/meta/store';
import { testSecretBox } from '../../../../test/helpers/secrets';

const noAgent: WithAgent = (host) => Promise.reject(new Error(`no agent of ${host} in this test`));

export function stepServices(store: MetaStore, given: { agents?: Agents; withAgent?: WithAgent; logger?: Logger } = {}): StepServices {
  return {
    propose: (cmd) => store.propose(cmd),
    agents: given.agents ?? new AgentPool(1),
    withAgent: given.withAgent ?? noAgent,
    logger: given.logger ?? silentLogger(),
    now: Date.now,
    secrets: testSecretBox(),
  };
}
