// The bank soak's short version in the default suite (bank-soak.ts): 3 rounds, one of each
// fault (a shard master, a compute node's postmaster, the manager leader SIGKILLed) under
// cross-shard transfers through both compute nodes. npm run soak:bank runs 20.
// Managers 127.0.1.131-133, agents 127.0.2.131-133 on port 18890.

import { describeBankSoak } from './bank-soak';

describeBankSoak({
  name: 'bank',
  rounds: 3,
  members: ['127.0.1.131:18800', '127.0.1.132:18800', '127.0.1.133:18800'],
  hosts: ['127.0.2.131', '127.0.2.132', '127.0.2.133'],
  agentPort: 18890,
  storagePorts: (i) => `${52100 + 20 * i}-${52119 + 20 * i}`,
  computerPorts: (i) => `${52200 + 10 * i}-${52209 + 10 * i}`,
});
