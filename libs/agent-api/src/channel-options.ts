// Channel options for every gRPC client of an agent (the manager's clients, and an agent
// pulling a backup stream from another agent).
//
// A local subchannel pool per client: with grpc-js's global pool, every address any
// client ever used stays in one process-wide pool that each channel close walks, so a
// manager that has talked to thousands of hosts (or to many unreachable ones) pays more
// for every close. With a pool per client, closing a client releases its connections.

import type { ChannelOptions } from '@grpc/grpc-js';

export const agentChannelOptions: ChannelOptions = {
  'grpc.use_local_subchannel_pool': 1,
};
