// npm run soak:bank: the bank soak (../bank-soak.ts) for 20 rounds, or KCM_BANK_ROUNDS: shard
// masters, compute nodes' postmasters and the manager leader SIGKILLed in turn under
// cross-shard transfers through both compute nodes, the bank checked after every round.
// Managers 127.0.1.134-136, agents 127.0.2.134-136 on port 18892 (not the default suite's).

import { describeBankSoak } from '../bank-soak';

describeBankSoak({
  name: 'bank-soak',
  rounds: Number(process.env.KCM_BANK_ROUNDS ?? 20),
  members: ['127.0.1.134:18802', '127.0.1.135:18802', '127.0.1.136:18802'],
  hosts: ['127.0.2.134', '127.0.2.135', '127.0.2.136'],
  agentPort: 18892,
  storagePorts: (i) => `${52300 + 20 * i}-${52319 + 20 * i}`,
  computerPorts: (i) => `${52400 + 10 * i}-${52409 + 10 * i}`,
});
