// Time to stream one snapshot between two GrpcTransports on loopback, end to end
// (checksum, chunks, reassembly, integrity check, delivery, status).
//
//   npx tsx bench/raft-transport/snapshot.ts          (MB=64 ROUNDS=3, INSECURE=1 for plaintext links, to change the size)

import { randomBytes } from 'node:crypto';
import { GrpcTransport } from '../../libs/raft/src/grpc-transport';
import { channelCredentials, serverCredentials } from '@kcm/agent-api';
import { benchLinks } from './links';

const megabytes = Number(process.env.MB ?? 64);
const rounds = Number(process.env.ROUNDS ?? 3);
const links = benchLinks(['127.0.66.1', '127.0.66.2']);
const a = new GrpcTransport({ ...links, channelCredentials: channelCredentials(), serverCredentials: serverCredentials(), id: 'a', listen: '127.0.66.1:0', peers: {} });
const b = new GrpcTransport({ ...links, channelCredentials: channelCredentials(), serverCredentials: serverCredentials(), id: 'b', listen: '127.0.66.2:0', peers: {} });
await Promise.all([a.start(), b.start()]);
a.setPeers({ b: b.address() });
b.onMessage(() => {});
const image = new Uint8Array(randomBytes(megabytes * 1024 * 1024));
for (let round = 1; round <= rounds; round++) {
  const started = performance.now();
  const ok = await new Promise<boolean>((resolve) => {
    a.onSnapshotStatus((_peer, ok) => resolve(ok));
    a.send([{ type: 'Snap', from: 'a', to: 'b', term: 1, snapshot: { meta: { index: round, term: 1, conf: { voters: ['a', 'b'], learners: [] } }, data: image } }]);
  });
  const ms = performance.now() - started;
  console.log(`snapshot ${megabytes} MiB: ${ok ? 'ok' : 'FAILED'} in ${ms.toFixed(0)} ms (${((megabytes * 1000) / ms).toFixed(0)} MiB/s)`);
}
await Promise.all([a.stop(), b.stop()]);
