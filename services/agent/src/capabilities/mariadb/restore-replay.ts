// Replay archived binlogs onto an instance up to a point in time (cluster_restore's second
// step on a destination shard master): the files are read back from backup storage into a
// staging dir, then `mariadb-binlog --start-position=<backup GTID> --stop-datetime=<T>`
// is piped into the instance as root over its socket. The replayed transactions keep their
// GTIDs, so the restored master's position continues the source's and standbys rebuilt or
// attached afterwards replicate from it.

import { createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { AgentContext } from '../../capability';
import { spawnPiped } from '../../ops/exec';
import type { MariaDbReplayBinlogsReply, MariaDbReplayBinlogsRequest } from '@kcm/agent-api';
import { checkPort, loadAdminAccount, mariadbTools } from './instance-layout';
import { layoutOf } from './lifecycle';
import { withAdmin } from './sql';
import { checkStoredObject, readStoredObject } from './storage-objects';

const GTID_LIST = /^(\d+-\d+-\d+(,\d+-\d+-\d+)*)?$/;
const REPLAY_TIMEOUT_MS = 6 * 3600_000;
export const MARIADB_BINLOG = '/usr/bin/mariadb-binlog';

export async function replayBinlogs(ctx: AgentContext, req: MariaDbReplayBinlogsRequest): Promise<MariaDbReplayBinlogsReply> {
  const layout = await layoutOf(ctx, checkPort(req.port));
  if (!GTID_LIST.test(req.start_gtid)) throw new Error(`start_gtid ${JSON.stringify(req.start_gtid)} is not a GTID list`);
  if (!Number.isInteger(req.stop_time) || req.stop_time <= 0) throw new Error('stop_time must be Unix seconds');
  const binlogs = req.binlogs.map((b, i) => checkStoredObject(b, `binlogs[${i}]`));
  const admin = await loadAdminAccount(layout);
  const staging = path.join(layout.instanceDir, 'replay');
  await rm(staging, { recursive: true, force: true });
  await mkdir(staging, { mode: 0o700 });
  try {
    let bytes = 0;
    const files: string[] = [];
    for (const [i, obj] of binlogs.entries()) {
      const file = path.join(staging, `${String(i).padStart(6, '0')}.binlog`);
      await pipeline(readStoredObject(obj), async function* (source: AsyncIterable<Buffer>) {
        for await (const piece of source) {
          bytes += piece.length;
          yield piece;
        }
      }, createWriteStream(file));
      files.push(file);
    }
    if (files.length) await pipeBinlogsInto(layout.socket, files, req.start_gtid, req.stop_time);
    const gtid = await withAdmin(layout, admin, [], async (s) => (await s.rows<{ pos: string }>('read gtid_binlog_pos', 'SELECT @@gtid_binlog_pos AS pos'))[0]?.pos ?? '');
    ctx.logger.info({ port: layout.port, files: files.length, bytes, stop_time: req.stop_time, gtid }, 'binlogs replayed');
    return { gtid_pos: gtid, files: files.length, bytes };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** `mariadb-binlog ... | mariadb`: both processes must exit 0, or the replay failed. */
async function pipeBinlogsInto(socket: string, files: string[], startGtid: string, stopTime: number): Promise<void> {
  const args = [...(startGtid ? [`--start-position=${startGtid}`] : []), `--stop-datetime=${localDateTime(stopTime)}`, ...files];
  const decode = spawnPiped(MARIADB_BINLOG, args, { input: 'ignore', output: 'pipe', timeoutMs: REPLAY_TIMEOUT_MS });
  const apply = spawnPiped(mariadbTools.client, ['--no-defaults', `--socket=${socket}`, '--user=root', '--batch', '--binary-mode'], { input: 'pipe', output: 'ignore', timeoutMs: REPLAY_TIMEOUT_MS });
  try {
    await Promise.all([pipeline(decode.stdout, apply.stdin), decode.done, apply.done]);
  } catch (err) {
    decode.kill();
    apply.kill();
    throw new Error(`binlog replay failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

/** mariadb-binlog reads --stop-datetime in its local time zone, which is this process's. */
export function localDateTime(unixSeconds: number): string {
  const d = new Date(unixSeconds * 1000);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}
