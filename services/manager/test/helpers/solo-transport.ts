// The Raft transport of a one-member group: it has nobody to talk to, so nothing is sent or
// received and nothing listens (tests build many such members in one process).

import type { Transport } from '@kcm/raft';

export function soloTransport(): Transport {
  return {
    start: async () => {},
    send: (msgs) => {
      if (msgs.length > 0) throw new Error(`a one-member group sent ${msgs.length} message(s) to ${msgs[0].to}`);
    },
    onMessage: () => {},
    onUnreachable: () => {},
    onSnapshotStatus: () => {},
    setPeers: () => {},
    stop: async () => {},
  };
}
