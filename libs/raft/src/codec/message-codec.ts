// Message <-> proto (proto/raft.proto), two ways:
//
// - encodeMessageBatch/decodeMessageBatch: the hot path (every App and heartbeat). Written
//   by hand against the wire format, one exact-size buffer, no intermediate objects;
//   about 2x faster than protobufjs's fromObject+encode both ways (bench/raft-transport/codec.ts).
//   message-codec.test.ts checks that it and the proto-loader codec decode each other's output.
// - toProtoMessage/fromProtoMessage: the object shape proto-loader serialises, used for the
//   rare snapshot header where speed does not matter.
//
// Decoded Uint8Arrays (entry data, context) are plain Uint8Array views into ONE private
// copy of the received batch: the caller may keep them for as long as it likes, and
// gRPC's receive buffers are never pinned by a long-lived log entry.

import { imageInMemory, type ConfState, type Entry, type EntryType, type Message, type MessageType, type Snapshot } from '../core/types';
import type { ProtoMessage } from '../grpc/raft-proto';
import { WIRE_LEN, WIRE_VARINT, WireDecodeError, WireReader, WireWriter, lenFieldSize, tagOf, varintSize } from './protobuf-wire';

/** proto MessageType numbers, indexed by number (0 is MESSAGE_TYPE_UNSPECIFIED). */
const MESSAGE_TYPES: readonly (MessageType | undefined)[] = [
  undefined, 'PreVote', 'PreVoteResp', 'Vote', 'VoteResp', 'App', 'AppResp',
  'Heartbeat', 'HeartbeatResp', 'Snap', 'TimeoutNow', 'ReadIndex', 'ReadIndexResp',
];
const MESSAGE_TYPE_NUMBER = new Map<MessageType, number>(
  MESSAGE_TYPES.flatMap((t, n) => (t === undefined ? [] : [[t, n] as const])),
);
const ENTRY_CONF = 1;

function messageTypeNumber(type: MessageType): number {
  const n = MESSAGE_TYPE_NUMBER.get(type);
  if (n === undefined) throw new TypeError(`unknown message type ${String(type)}`);
  return n;
}

function messageTypeOf(n: number): MessageType {
  const t = MESSAGE_TYPES[n];
  if (t === undefined) throw new WireDecodeError(`unknown message type number ${n}`);
  return t;
}

// Field tags (field number << 3 | wire type); every one fits in a single byte.
const V = WIRE_VARINT;
const L = WIRE_LEN;
const T = {
  batchMessage: tagOf(1, L),
  type: tagOf(1, V), from: tagOf(2, L), to: tagOf(3, L), term: tagOf(4, V), logTerm: tagOf(5, V),
  index: tagOf(6, V), entry: tagOf(7, L), commit: tagOf(8, V), reject: tagOf(9, V),
  rejectHint: tagOf(10, V), snapshot: tagOf(11, L), context: tagOf(12, L),
  entryTerm: tagOf(1, V), entryIndex: tagOf(2, V), entryType: tagOf(3, V), entryData: tagOf(4, L),
  snapMeta: tagOf(1, L), snapData: tagOf(2, L),
  metaIndex: tagOf(1, V), metaTerm: tagOf(2, V), metaConf: tagOf(3, L),
  voter: tagOf(1, L), learner: tagOf(2, L),
} as const;

// Node ids repeat in every message: keep their UTF-8 encodings. Bounded, because ids
// are few in a healthy group and an attacker-controlled id must not grow memory.
const utf8Cache = new Map<string, Buffer>();
const UTF8_CACHE_LIMIT = 1024;

function utf8(s: string): Buffer {
  let b = utf8Cache.get(s);
  if (b === undefined) {
    if (utf8Cache.size >= UTF8_CACHE_LIMIT) utf8Cache.clear();
    b = Buffer.from(s, 'utf8');
    utf8Cache.set(s, b);
  }
  return b;
}

const strSize = (s: string): number => lenFieldSize(1, utf8(s).byteLength);
const optVarintSize = (v: number | undefined): number => (v === undefined ? 0 : 1 + varintSize(v));

// ---- sizing: pushes the size of every nested message in the order the writer visits them.

function entrySize(e: Entry): number {
  let size = 1 + varintSize(e.term) + 1 + varintSize(e.index);
  if (e.type === 'conf') size += 2;
  if (e.data.byteLength > 0) size += lenFieldSize(1, e.data.byteLength);
  return size;
}

function confSize(c: ConfState): number {
  let size = 0;
  for (const v of c.voters) size += strSize(v);
  for (const l of c.learners) size += strSize(l);
  return size;
}

function snapshotSize(s: Snapshot, sizes: number[]): number {
  const conf = confSize(s.meta.conf);
  const meta = 1 + varintSize(s.meta.index) + 1 + varintSize(s.meta.term) + lenFieldSize(1, conf);
  sizes.push(meta, conf);
  let size = lenFieldSize(1, meta);
  if (s.data.byteLength > 0) size += lenFieldSize(1, s.data.byteLength);
  return size;
}

function messageSize(m: Message, sizes: number[]): number {
  let size = 1 + varintSize(messageTypeNumber(m.type)) + strSize(m.from) + strSize(m.to);
  if (m.term !== 0) size += 1 + varintSize(m.term);
  size += optVarintSize(m.logTerm) + optVarintSize(m.index) + optVarintSize(m.commit) + optVarintSize(m.rejectHint);
  if (m.reject !== undefined) size += 2;
  if (m.entries !== undefined) {
    for (const e of m.entries) {
      const es = entrySize(e);
      sizes.push(es);
      size += lenFieldSize(1, es);
    }
  }
  if (m.snapshot !== undefined) {
    const slot = sizes.length;
    sizes.push(0);
    const ss = snapshotSize(m.snapshot, sizes);
    sizes[slot] = ss;
    size += lenFieldSize(1, ss);
  }
  if (m.context !== undefined) size += lenFieldSize(1, m.context.byteLength);
  return size;
}

// ---- writing: consumes `sizes` in the order they were pushed.

class MessageWriter extends WireWriter {
  private next = 0;
  constructor(size: number, private readonly sizes: number[]) {
    super(size);
  }

  private nestedSize(): number {
    return this.sizes[this.next++];
  }

  /** Tag and value; nothing when the value is absent. */
  private varintField(tag: number, v: number | undefined): void {
    if (v === undefined) return;
    this.varint(tag);
    this.varint(v);
  }

  private str(tag: number, s: string): void {
    this.bytesField(tag, utf8(s));
  }

  private bytesField(tag: number, data: Uint8Array): void {
    this.varint(tag);
    this.bytes(data);
  }

  /** Starts a nested message: its tag and the length computed by the sizing pass. */
  private nestedHeader(tag: number): void {
    this.varint(tag);
    this.varint(this.nestedSize());
  }

  /** One element of MessageBatch.messages: tag, length, body. */
  batchElement(m: Message): void {
    this.nestedHeader(T.batchMessage);
    this.message(m);
  }

  private message(m: Message): void {
    this.varint(T.type);
    this.varint(messageTypeNumber(m.type));
    this.str(T.from, m.from);
    this.str(T.to, m.to);
    if (m.term !== 0) this.varintField(T.term, m.term);
    this.varintField(T.logTerm, m.logTerm);
    this.varintField(T.index, m.index);
    if (m.entries !== undefined) for (const e of m.entries) this.entry(e);
    this.varintField(T.commit, m.commit);
    if (m.reject !== undefined) this.varintField(T.reject, m.reject ? 1 : 0);
    this.varintField(T.rejectHint, m.rejectHint);
    if (m.snapshot !== undefined) this.snapshot(m.snapshot);
    if (m.context !== undefined) this.bytesField(T.context, m.context);
  }

  private entry(e: Entry): void {
    this.nestedHeader(T.entry);
    this.varintField(T.entryTerm, e.term);
    this.varintField(T.entryIndex, e.index);
    if (e.type === 'conf') this.varintField(T.entryType, ENTRY_CONF);
    if (e.data.byteLength > 0) this.bytesField(T.entryData, e.data);
  }

  private snapshot(s: Snapshot): void {
    this.nestedHeader(T.snapshot);
    this.nestedHeader(T.snapMeta);
    this.varintField(T.metaIndex, s.meta.index);
    this.varintField(T.metaTerm, s.meta.term);
    this.nestedHeader(T.metaConf);
    for (const v of s.meta.conf.voters) this.str(T.voter, v);
    for (const l of s.meta.conf.learners) this.str(T.learner, l);
    // A stored image is streamed (SendSnapshot), never encoded inline: imageInMemory throws for one.
    if (s.data.byteLength > 0) this.bytesField(T.snapData, imageInMemory(s.data));
  }
}

/** Encodes messages as one kcm.raft.v1.MessageBatch. */
export function encodeMessageBatch(messages: readonly Message[]): Buffer {
  const sizes: number[] = [];
  let total = 0;
  for (const m of messages) {
    const slot = sizes.length;
    sizes.push(0);
    const ms = messageSize(m, sizes);
    sizes[slot] = ms;
    total += lenFieldSize(1, ms);
  }
  const w = new MessageWriter(total, sizes);
  for (const m of messages) w.batchElement(m);
  if (w.pos !== total) throw new Error(`message codec size mismatch: wrote ${w.pos} of ${total}`);
  return w.buf;
}

// ---- reading

/** Decodes a kcm.raft.v1.MessageBatch. Throws WireDecodeError on malformed input. */
export function decodeMessageBatch(received: Uint8Array): Message[] {
  // One private copy (see the header comment); Buffer only for its fast UTF-8 decoding.
  const copy = new Uint8Array(received);
  const r = new WireReader(Buffer.from(copy.buffer, copy.byteOffset, copy.byteLength));
  const messages: Message[] = [];
  while (!r.done()) {
    const tag = r.varint();
    if (tag === T.batchMessage) messages.push(r.nested(readMessage));
    else r.skip(tag & 7);
  }
  return messages;
}

/** A plain Uint8Array view (not a Buffer) over the same memory. */
function view(b: Uint8Array): Uint8Array {
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

function readMessage(r: WireReader): Message {
  const m: Message = { type: 'App', from: '', to: '', term: 0 };
  let typeSeen = false;
  while (!r.done()) {
    const tag = r.varint();
    switch (tag) {
      case T.type: m.type = messageTypeOf(r.varint()); typeSeen = true; break;
      case T.from: m.from = r.string(); break;
      case T.to: m.to = r.string(); break;
      case T.term: m.term = r.varint(); break;
      case T.logTerm: m.logTerm = r.varint(); break;
      case T.index: m.index = r.varint(); break;
      case T.entry: (m.entries ??= []).push(r.nested(readEntry)); break;
      case T.commit: m.commit = r.varint(); break;
      case T.reject: m.reject = r.varint() !== 0; break;
      case T.rejectHint: m.rejectHint = r.varint(); break;
      case T.snapshot: m.snapshot = r.nested(readSnapshot); break;
      case T.context: m.context = r.bytes(); break;
      default: r.skip(tag & 7);
    }
  }
  if (!typeSeen) throw new WireDecodeError('message without a type');
  return m;
}

function readEntry(r: WireReader): Entry {
  let term = 0, index = 0;
  let type: EntryType = 'normal';
  let data: Uint8Array = EMPTY;
  while (!r.done()) {
    const tag = r.varint();
    switch (tag) {
      case T.entryTerm: term = r.varint(); break;
      case T.entryIndex: index = r.varint(); break;
      case T.entryType: type = r.varint() === ENTRY_CONF ? 'conf' : 'normal'; break;
      case T.entryData: data = r.bytes(); break;
      default: r.skip(tag & 7);
    }
  }
  return { term, index, type, data };
}

const EMPTY = new Uint8Array(0);

function readSnapshot(r: WireReader): Snapshot {
  const snap: Snapshot = { meta: { index: 0, term: 0, conf: { voters: [], learners: [] } }, data: EMPTY };
  while (!r.done()) {
    const tag = r.varint();
    if (tag === T.snapMeta) {
      r.nested((mr) => {
        while (!mr.done()) {
          const mt = mr.varint();
          if (mt === T.metaIndex) snap.meta.index = mr.varint();
          else if (mt === T.metaTerm) snap.meta.term = mr.varint();
          else if (mt === T.metaConf) snap.meta.conf = mr.nested(readConf);
          else mr.skip(mt & 7);
        }
      });
    } else if (tag === T.snapData) snap.data = r.bytes();
    else r.skip(tag & 7);
  }
  return snap;
}

function readConf(r: WireReader): ConfState {
  const conf: ConfState = { voters: [], learners: [] };
  while (!r.done()) {
    const tag = r.varint();
    if (tag === T.voter) conf.voters.push(r.string());
    else if (tag === T.learner) conf.learners.push(r.string());
    else r.skip(tag & 7);
  }
  return conf;
}

// ---- the object shape proto-loader serialises (snapshot headers, compatibility tests)

export function toProtoMessage(m: Message): ProtoMessage {
  const p: ProtoMessage = { type: messageTypeNumber(m.type), from: m.from, to: m.to, term: m.term };
  if (m.logTerm !== undefined) p.logTerm = m.logTerm;
  if (m.index !== undefined) p.index = m.index;
  if (m.entries !== undefined) {
    p.entries = m.entries.map((e) => ({ term: e.term, index: e.index, type: e.type === 'conf' ? ENTRY_CONF : 0, data: e.data }));
  }
  if (m.commit !== undefined) p.commit = m.commit;
  if (m.reject !== undefined) p.reject = m.reject;
  if (m.rejectHint !== undefined) p.rejectHint = m.rejectHint;
  if (m.snapshot !== undefined) {
    const { meta, data } = m.snapshot;
    p.snapshot = { meta: { index: meta.index, term: meta.term, conf: { voters: meta.conf.voters, learners: meta.conf.learners } }, data: imageInMemory(data) };
  }
  if (m.context !== undefined) p.context = m.context;
  return p;
}

/** Inverse of toProtoMessage for what proto-loader decodes (defaults omitted, bytes as Buffer). */
export function fromProtoMessage(p: ProtoMessage): Message {
  const m: Message = { type: messageTypeOf(p.type ?? 0), from: p.from ?? '', to: p.to ?? '', term: p.term ?? 0 };
  if (p.logTerm != null) m.logTerm = p.logTerm;
  if (p.index != null) m.index = p.index;
  if (p.entries != null && p.entries.length > 0) {
    m.entries = p.entries.map((e) => ({
      term: e.term ?? 0,
      index: e.index ?? 0,
      type: e.type === ENTRY_CONF ? 'conf' : 'normal',
      data: e.data != null ? view(e.data) : EMPTY,
    }));
  }
  if (p.commit != null) m.commit = p.commit;
  if (p.reject != null) m.reject = p.reject;
  if (p.rejectHint != null) m.rejectHint = p.rejectHint;
  if (p.snapshot != null) {
    const meta = p.snapshot.meta;
    m.snapshot = {
      meta: {
        index: meta?.index ?? 0,
        term: meta?.term ?? 0,
        conf: { voters: meta?.conf?.voters ?? [], learners: meta?.conf?.learners ?? [] },
      },
      data: p.snapshot.data != null ? view(p.snapshot.data) : EMPTY,
    };
  }
  if (p.context != null) m.context = view(p.context);
  return m;
}
