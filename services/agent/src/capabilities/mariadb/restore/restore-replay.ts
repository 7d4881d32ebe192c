// Replay archived binlogs onto an instance up to a point in time (cluster_restore's second
// step on a destination shard master): the files are read back from backup storage into a
// staging dir, then each, in order, goes through `mariadb-binlog
// --start-position=<the instance's GTID position now> --stop-datetime=<T>` piped into the
// instance as root over its socket. Starting each file at the instance's own position
// skips what it already has: the backup's transactions, and those a file archived from a
// new master after a failover shares with the old master's last file. The replayed
// transactions keep their GTIDs, so the restored master continues the source's history
// and standbys rebuilt from it replicate on from there.

import { createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { AgentContext } from '../../../capability';
import { spawnPiped } from '../../../ops/exec';
import { isGtidPosText, type MariaDbDropClusterDatabasesReply, type MariaDbReplayBinlogsReply, type MariaDbReplayBinlogsRequest } from '@kcm/agent-api';
import { summariseBinlog } from './binlog-files';
import { checkPort, loadAdminAccount, mariadbTools, type InstanceLayout } from '../instance/instance-layout';
import { layoutOf } from '../instance/lifecycle';
import { withAdmin } from '../instance/sql';
import { checkStoredObject, readStoredObject } from './storage-objects';

const REPLAY_TIMEOUT_MS = 6 * 3600_000;
export const MARIADB_BINLOG = '/usr/bin/mariadb-binlog';

export async function replayBinlogs(ctx: AgentContext, req: MariaDbReplayBinlogsRequest): Promise<MariaDbReplayBinlogsReply> {
  const layout = await layoutOf(ctx, checkPort(req.port));
  if (!isGtidPosText(req.start_gtid)) throw new Error(`start_gtid ${JSON.stringify(req.start_gtid)} is not a GTID list`);
  if (!Number.isInteger(req.stop_time) || req.stop_time <= 0) throw new Error('stop_time must be Unix seconds');
  const stopGtid = req.stop_gtid ?? '';
  if (stopGtid && !isGtidPosText(stopGtid)) throw new Error(`stop_gtid ${JSON.stringify(stopGtid)} is not a GTID list`);
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
    const position = () => withAdmin(layout, admin, [], async (s) => (await s.rows<{ pos: string }>('read gtid_binlog_pos', 'SELECT @@gtid_binlog_pos AS pos'))[0]?.pos ?? '');
    // At the backup's position, or past it when a replay cut short is run again.
    const before = await position();
    if (!reaches(before, req.start_gtid)) throw new Error(`the instance is at GTID ${JSON.stringify(before)}, short of the backup's ${req.start_gtid}: restore the backup first`);
    let replayed = 0;
    for (const file of files) {
      // A file begun at or after T holds nothing to apply, and must not be handed to
      // mariadb-binlog: a replay cut short at T leaves the instance behind the file's start
      // state, which mariadb-binlog reports as missing data.
      if ((await summariseBinlog(file)).firstEventTime >= req.stop_time) break;
      const at = await position();
      // Up to a GTID: only the domains still short of it bound the replay (mariadb-binlog
      // would read on looking for a domain's GTID that is already applied).
      const stopAt = stopGtid ? stillAhead(at, stopGtid) : undefined;
      if (stopAt === '') break;
      await pipeBinlogInto(layout.socket, file, at, stopAt === undefined ? { time: req.stop_time } : { gtid: stopAt });
      replayed++;
    }
    const gtid = await position();
    ctx.logger.info({ port: layout.port, files: replayed, fetched: files.length, bytes, stop_time: req.stop_time, gtid }, 'binlogs replayed');
    return { gtid_pos: gtid, files: replayed, bytes };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** `mariadb-binlog ... | mariadb`: both processes must exit 0, or the replay failed. */
async function pipeBinlogInto(socket: string, file: string, startGtid: string, stop: { time: number } | { gtid: string }): Promise<void> {
  const until = 'gtid' in stop ? `--stop-position=${stop.gtid}` : `--stop-datetime=${localDateTime(stop.time)}`;
  const args = [...(startGtid ? [`--start-position=${startGtid}`] : []), until, file];
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

/** The GTIDs of `target` whose domain `pos` has not reached, as a GTID list ('' when it reached them all). */
function stillAhead(pos: string, target: string): string {
  return target.split(',').filter(Boolean).filter((g) => !reaches(pos, g)).join(',');
}

/** Whether GTID state `pos` includes every domain's seq_no of `target`. */
function reaches(pos: string, target: string): boolean {
  const seqOf = (list: string) => new Map(list.split(',').filter(Boolean).map((g) => [g.split('-')[0], BigInt(g.split('-')[2])] as const));
  const have = seqOf(pos);
  return [...seqOf(target)].every(([domain, seq]) => (have.get(domain) ?? -1n) >= seq);
}

/** mariadb-binlog reads --stop-datetime in its local time zone, which is this process's. */
export function localDateTime(unixSeconds: number): string {
  const d = new Date(unixSeconds * 1000);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

/** Every `D_$$_S` database of the instance dropped, in the binlog (its standbys drop them too). */
export async function dropClusterDatabases(layout: InstanceLayout): Promise<MariaDbDropClusterDatabasesReply> {
  const admin = await loadAdminAccount(layout);
  return withAdmin(layout, admin, [], async (s) => {
    const rows = await s.rows<{ name: string }>('list cluster databases', "SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE '%\\_$$\\_%'");
    const dropped = rows.map((r) => r.name).sort();
    for (const name of dropped) await s.run(`drop database ${name}`, `DROP DATABASE \`${name.replace(/`/g, '``')}\``);
    return { dropped };
  });
}
