// The one place kcm's gRPC links get their credentials: the manager's clients of the agents,
// an agent pulling a backup from another agent, the agents' servers, and the managers'
// forwarding link. Insecure today; mutual TLS plugs in here (and only here).

import * as grpc from '@grpc/grpc-js';

export function channelCredentials(): grpc.ChannelCredentials {
  return grpc.credentials.createInsecure();
}

export function serverCredentials(): grpc.ServerCredentials {
  return grpc.ServerCredentials.createInsecure();
}
