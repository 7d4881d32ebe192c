// The source side of continuous binlog archiving: a closed binlog file of an instance,
// streamed to whoever pulls it (StreamBinlog) or pushed to a backup storage's agent
// (ArchiveBinlog). A file still being written is never archived: the archiving round
// flushes first, then archives what is closed.

import { createReadStream } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import type { AgentContext } from '../../../capability';
import { agentStatusOf, type MariaDbArchiveBinlogReply, type MariaDbArchiveBinlogRequest, type MariaDbBinlogChunk, type MariaDbStreamBinlogRequest } from '@kcm/agent-api';
import { closedBinlogPath } from './binlog-files';
import { checkPort } from '../instance/instance-layout';
import { layoutOf } from '../instance/lifecycle';
import { checkStoredObject, putStoredObject } from './storage-objects';
import { sealedBytesOf } from '../../storage/sealed-stream';

const CHUNK_BYTES = 256 * 1024;

export function streamBinlogHandler(ctx: AgentContext): grpc.handleServerStreamingCall<MariaDbStreamBinlogRequest, MariaDbBinlogChunk> {
  return (call) => {
    sendBinlog(ctx, call).catch((err: unknown) => {
      ctx.logger.error({ err, rpc: 'StreamBinlog', port: call.request.port }, 'binlog stream failed');
      call.emit('error', { code: agentStatusOf(err), details: err instanceof Error ? err.message : String(err) });
    });
  };
}

async function sendBinlog(ctx: AgentContext, call: grpc.ServerWritableStream<MariaDbStreamBinlogRequest, MariaDbBinlogChunk>): Promise<void> {
  const layout = await layoutOf(ctx, checkPort(call.request.port));
  const { file } = await closedBinlogPath(layout, call.request.name);
  for await (const piece of createReadStream(file, { highWaterMark: CHUNK_BYTES })) {
    if (call.cancelled) return;
    if (!call.write({ data: piece as Buffer })) await new Promise((resolve) => call.once('drain', resolve));
  }
  call.end();
}

export async function archiveBinlog(ctx: AgentContext, req: MariaDbArchiveBinlogRequest): Promise<MariaDbArchiveBinlogReply> {
  const layout = await layoutOf(ctx, checkPort(req.port));
  const target = checkStoredObject(req.target, 'target');
  const { file, summary } = await closedBinlogPath(layout, req.name);
  const meta = {
    ...req.meta,
    binlog: summary.name,
    start_gtid_state: summary.start_gtid_state,
    first_event_time: String(summary.first_event_time),
    last_event_time: String(summary.last_event_time),
  };
  const stored = await putStoredObject(target, meta, createReadStream(file, { highWaterMark: CHUNK_BYTES }));
  // A sealed binlog is its file plus the format's header and one tag per record.
  const expected = target.data_key?.length ? sealedBytesOf(summary.size) : summary.size;
  if (stored.bytes !== expected) throw new Error(`storage stored ${stored.bytes} bytes of ${summary.name}, expected ${expected} (the file has ${summary.size})`);
  ctx.logger.info({ port: layout.port, binlog: summary.name, key: target.key, bytes: stored.bytes }, 'binlog archived');
  return { file: summary, sha256: stored.sha256, bytes: stored.bytes, meta: stored.meta };
}
