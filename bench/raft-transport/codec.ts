// Encode/decode cost of one MessageBatch: 64 App messages, each carrying 8 entries of
// 128 bytes, as a leader streams them to one follower under load. Compares the
// hand-written codec the transport uses with proto-loader's generic one for raft.proto.
//
//   npx tsx bench/raft-transport/codec.ts

import type { Message } from '../../libs/raft/src/core/types';
import { decodeMessageBatch, encodeMessageBatch, fromProtoMessage, toProtoMessage } from '../../libs/raft/src/codec/message-codec';
import { protoLoaderDefinition, type ProtoMessage } from '../../libs/raft/src/grpc/raft-proto';

const MESSAGES = 64;
const ENTRIES_PER_MESSAGE = Number(process.env.ENTRIES ?? 8);
const ENTRY_BYTES = 128;

function appMessage(i: number): Message {
  const first = 1_000_000 + i * ENTRIES_PER_MESSAGE;
  const entries = Array.from({ length: ENTRIES_PER_MESSAGE }, (_, k) => ({
    term: 12, index: first + k, type: 'normal' as const, data: new Uint8Array(ENTRY_BYTES).fill(k),
  }));
  return { type: 'App', from: '127.0.1.1:58000', to: '127.0.1.2:58000', term: 12, logTerm: 12, index: first - 1, commit: first - 64, entries };
}

function measure(name: string, run: () => unknown): number {
  const deadline = performance.now() + 300;
  while (performance.now() < deadline) run(); // warm up the JIT
  let rounds = 0;
  const start = performance.now();
  while (performance.now() - start < 1000) {
    for (let i = 0; i < 50; i++) run();
    rounds += 50;
  }
  const micros = ((performance.now() - start) * 1000) / rounds;
  console.log(`${name.padEnd(38)} ${micros.toFixed(1).padStart(8)} us/batch  ${((MESSAGES * ENTRIES_PER_MESSAGE) / micros).toFixed(2)} M entries/s`);
  return micros;
}

const batch = Array.from({ length: MESSAGES }, (_, i) => appMessage(i));
const wire = encodeMessageBatch(batch);
const reference = protoLoaderDefinition().SendMessages;
console.log(`batch: ${MESSAGES} App x ${ENTRIES_PER_MESSAGE} entries x ${ENTRY_BYTES} B = ${wire.length} bytes on the wire`);
const enc = measure('encode (hand-written codec)', () => encodeMessageBatch(batch));
const dec = measure('decode (hand-written codec)', () => decodeMessageBatch(wire));
const refEnc = measure('encode (proto-loader, for comparison)', () => reference.requestSerialize({ messages: batch.map(toProtoMessage) }));
const refDec = measure('decode (proto-loader, for comparison)', () =>
  (reference.requestDeserialize(wire) as { messages: ProtoMessage[] }).messages.map(fromProtoMessage));
console.log(`speed-up: encode ${(refEnc / enc).toFixed(1)}x, decode ${(refDec / dec).toFixed(1)}x`);
