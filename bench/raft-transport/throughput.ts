// Messages per second through one GrpcTransport stream on loopback: App messages of
// 8 entries x 128 bytes, 64 per send() as a busy leader would hand them over, with the
// sender pausing only while more than 1024 are queued (the queue bound is 4096).
//
//   npx tsx bench/raft-transport/throughput.ts        (SECONDS=5, INSECURE=1 for plaintext links, to change the length)

import type { Message } from '../../libs/raft/src/core/types';
import { GrpcTransport } from '../../libs/raft/src/grpc-transport';
import { channelCredentials, serverCredentials } from '@kcm/agent-api';
import { benchLinks } from './links';

const seconds = Number(process.env.SECONDS ?? 5);
const ENTRIES = 8;
const links = benchLinks(['127.0.67.1', '127.0.67.2']);
const a = new GrpcTransport({ ...links, channelCredentials: channelCredentials(), serverCredentials: serverCredentials(), id: 'a', listen: '127.0.67.1:0', peers: {} });
const b = new GrpcTransport({ ...links, channelCredentials: channelCredentials(), serverCredentials: serverCredentials(), id: 'b', listen: '127.0.67.2:0', peers: {} });
await Promise.all([a.start(), b.start()]);
a.setPeers({ b: b.address() });
let received = 0;
let lastCommit = 0;
let outOfOrder = 0;
b.onMessage((m) => {
  received++;
  if ((m.commit ?? 0) <= lastCommit) outOfOrder++;
  lastCommit = m.commit ?? 0;
});

const data = new Uint8Array(128).fill(1);
let seq = 0;
const app = (): Message => {
  seq++;
  const first = seq * ENTRIES;
  return {
    type: 'App', from: 'a', to: 'b', term: 3, logTerm: 3, index: first - 1, commit: seq,
    entries: Array.from({ length: ENTRIES }, (_, k) => ({ term: 3, index: first + k, type: 'normal' as const, data })),
  };
};

const started = performance.now();
const deadline = started + seconds * 1000;
while (performance.now() < deadline) {
  if ((a.stats().peers.b?.queued ?? 0) > 1024) {
    await new Promise((r) => setTimeout(r, 1));
    continue;
  }
  a.send(Array.from({ length: 64 }, app));
  await new Promise((r) => setImmediate(r));
}
const sent = seq;
while (received < sent - a.stats().messagesDropped && performance.now() < deadline + 10_000) await new Promise((r) => setTimeout(r, 5));
const elapsed = (performance.now() - started) / 1000;
const stats = a.stats();
console.log(`${received} of ${sent} App messages in ${elapsed.toFixed(1)} s: ${(received / elapsed).toFixed(0)} msg/s, ${((received * ENTRIES) / elapsed).toFixed(0)} entries/s`);
console.log(`writes: ${stats.batchesSent} (${(stats.messagesSent / stats.batchesSent).toFixed(1)} messages per write), dropped: ${stats.messagesDropped}, out of order: ${outOfOrder}`);
await Promise.all([a.stop(), b.stop()]);
