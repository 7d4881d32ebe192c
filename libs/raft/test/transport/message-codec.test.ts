import { describe, expect, it } from 'vitest';
import type { Message } from '../../src/core/types';
import { decodeMessageBatch, encodeMessageBatch, fromProtoMessage, toProtoMessage } from '../../src/codec/message-codec';
import { protoLoaderDefinition, type ProtoMessage } from '../../src/grpc/raft-proto';
import { WireDecodeError } from '../../src/codec/protobuf-wire';

const bytes = (...b: number[]) => new Uint8Array(b);

/** One message of every type, covering every field, zero values and large numbers. */
const everyShape: Message[] = [
  { type: 'PreVote', from: 'n1', to: 'n2', term: 7, index: 10, logTerm: 6 },
  { type: 'PreVoteResp', from: 'n2', to: 'n1', term: 7, reject: false },
  { type: 'Vote', from: 'n1', to: 'n3', term: 8, index: 0, logTerm: 0, context: new TextEncoder().encode('transfer') },
  { type: 'VoteResp', from: 'n3', to: 'n1', term: 8, reject: true },
  {
    type: 'App', from: 'n1', to: 'n2', term: 2 ** 40 + 3, index: 2 ** 33, logTerm: 5, commit: 2 ** 52,
    entries: [
      { term: 5, index: 2 ** 33 + 1, type: 'normal', data: new Uint8Array(0) },
      { term: 5, index: 2 ** 33 + 2, type: 'conf', data: bytes(1, 2, 3) },
      { term: 6, index: 2 ** 33 + 3, type: 'normal', data: new Uint8Array(300).fill(0xab) },
    ],
  },
  { type: 'AppResp', from: 'n2', to: 'n1', term: 9, index: 4, reject: true, rejectHint: 3, logTerm: 2 },
  { type: 'Heartbeat', from: 'n1', to: 'n2', term: 9, commit: 0, context: new Uint8Array(0) },
  { type: 'HeartbeatResp', from: 'n2', to: 'n1', term: 9, context: bytes(0, 255) },
  {
    type: 'Snap', from: 'n1', to: 'n4', term: 9,
    snapshot: { meta: { index: 100, term: 8, conf: { voters: ['n1', 'n2', 'n3'], learners: ['n4'] } }, data: bytes(9, 8, 7) },
  },
  { type: 'TimeoutNow', from: 'n1', to: 'n2', term: 0 },
  { type: 'ReadIndex', from: 'n2', to: 'n1', term: 9, context: bytes(42) },
  { type: 'ReadIndexResp', from: 'n1', to: 'ñødé-ü', term: 9, index: 77, context: bytes(42) },
];

describe('message codec', () => {
  it('round-trips every message type and field, keeping zero values distinct from absent ones', () => {
    expect(decodeMessageBatch(encodeMessageBatch(everyShape))).toEqual(everyShape);
  });

  it('encodes bytes that the proto-loader codec of raft.proto decodes to the same messages', () => {
    const method = protoLoaderDefinition().SendMessages;
    const decoded = method.requestDeserialize(encodeMessageBatch(everyShape)) as { messages: ProtoMessage[] };
    expect(decoded.messages.map(fromProtoMessage)).toEqual(everyShape);
  });

  it('decodes what the proto-loader codec of raft.proto encodes', () => {
    const method = protoLoaderDefinition().SendMessages;
    const encoded = method.requestSerialize({ messages: everyShape.map(toProtoMessage) }) as Buffer;
    expect(decodeMessageBatch(encoded)).toEqual(everyShape);
  });

  it('decodes an empty batch to no messages', () => {
    expect(decodeMessageBatch(encodeMessageBatch([]))).toEqual([]);
  });

  it('gives decoded entry data its own memory, so reusing the receive buffer cannot corrupt the log', () => {
    const wire = encodeMessageBatch([everyShape[4]]);
    const decoded = decodeMessageBatch(wire);
    wire.fill(0);
    expect(decoded[0].entries?.[2].data).toEqual(new Uint8Array(300).fill(0xab));
    expect(Buffer.isBuffer(decoded[0].entries?.[2].data)).toBe(false);
  });

  it('rejects a truncated batch instead of inventing fields', () => {
    const wire = encodeMessageBatch([everyShape[4]]);
    expect(() => decodeMessageBatch(wire.subarray(0, wire.length - 10))).toThrow(WireDecodeError);
  });

  it('skips fields it does not know, so a newer sender can add fields', () => {
    const wire = encodeMessageBatch([everyShape[0]]);
    // Append field 99 (varint) inside the message: grow the message's length prefix by 3.
    const extra = Buffer.from([0x98, 0x06, 0x01]); // tag (99 << 3 | 0) = 792 as varint, value 1
    const body = wire.subarray(2);
    const patched = Buffer.concat([Buffer.from([0x0a, body.length + extra.length]), body, extra]);
    expect(decodeMessageBatch(patched)).toEqual([everyShape[0]]);
  });
});
