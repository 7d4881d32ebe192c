// A backup compressed at its source (capabilities/mariadb/backup/backup-compression.ts): the bytes
// sent are a zstd stream of the mbstream, the end frame carries the uncompressed size and
// position the receiver can no longer read, and a failing source fails the transfer.

import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endFrame, FrameReader } from '@kcm/agent-api';
import { checkCompression, sendCompressedPiped, zstdTool } from '../../src/capabilities/mariadb/backup/backup-compression';
import { gtidOfBackupInfo, rawBytesOfZstdSummary } from '../../src/capabilities/mariadb/backup/backup-info';
import { spawnPiped } from '../../src/ops/exec';

const run = promisify(execFile);

describe('a backup compressed at its source', () => {
  let dir: string;
  let mbstream: Buffer;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kcm-zbk-'));
    // Pages with room to spare, like InnoDB's: compressible.
    await writeFile(path.join(dir, 'ibdata1'), Buffer.concat(Array.from({ length: 64 }, (_, i) => Buffer.concat([Buffer.alloc(4096, i), Buffer.alloc(12288)]))));
    await writeFile(path.join(dir, 'mariadb_backup_binlog_info'), 'mariadb-bin.000003\t1234\t0-1-42\n');
    mbstream = (await run('mbstream', ['-c', 'ibdata1', 'mariadb_backup_binlog_info'], { cwd: dir, encoding: 'buffer', maxBuffer: 1 << 24 })).stdout;
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const unzstd = (stored: Buffer) =>
    new Promise<Buffer>((resolve, reject) => {
      const child = execFile(zstdTool, ['-d', '-q', '-c'], { encoding: 'buffer', maxBuffer: 1 << 24 }, (err, out) => (err ? reject(err) : resolve(out)));
      child.stdin!.end(stored);
    });
  // What mariabackup --extra-lsndir leaves beside the stream (10.11, taken on a standby).
  const INFO = "tool_name = mariabackup\nbinlog_pos = filename 'mariadb-bin.000001', position '170264', GTID of the last change '0-1-547'\ninnodb_to_lsn = 44848\n";

  it('piped: the source writes straight into zstd; the agent sends only zstd\'s bytes and reports the size zstd counted and the info file\'s position', async () => {
    const sent: Buffer[] = [];
    let infoDirSeen = '';
    const facts = await sendCompressedPiped(
      async (into, infoDir) => {
        infoDirSeen = infoDir;
        await writeFile(path.join(infoDir, 'xtrabackup_info'), INFO);
        return spawnPiped('mbstream', ['-c', 'ibdata1', 'mariadb_backup_binlog_info'], { input: 'ignore', output: into, timeoutMs: 30_000, cwd: dir });
      },
      dir,
      async (pieces) => void sent.push(...[pieces].flat()),
      new AbortController().signal,
    );
    const stored = Buffer.concat(sent);
    expect(stored.readUInt32LE(0)).toBe(0xfd2fb528);
    expect((await unzstd(stored)).equals(mbstream)).toBe(true);
    expect(facts).toEqual({ raw_bytes: mbstream.length, gtid_pos: '0-1-547' });
    await expect(readFile(path.join(infoDirSeen, 'xtrabackup_info'))).rejects.toThrow(/ENOENT/); // removed after use
  });

  it('piped: zstd\'s pipe reads go out gathered into sends of at least 1 MiB, in order', async () => {
    // Random bytes: zstd passes them through, ~6 MiB of output in pipe reads of <= 64 KiB.
    const sends: Buffer[] = [];
    await sendCompressedPiped(
      async (into, infoDir) => {
        await writeFile(path.join(infoDir, 'xtrabackup_info'), INFO);
        return spawnPiped('head', ['-c', String(6 * 1024 * 1024), '/dev/urandom'], { input: 'ignore', output: into, timeoutMs: 30_000 });
      },
      dir,
      async (pieces) => void sends.push(Buffer.concat([pieces].flat())),
      new AbortController().signal,
    );
    expect(sends.length).toBeGreaterThan(1);
    expect(sends.length).toBeLessThanOrEqual(7);
    for (const sent of sends.slice(0, -1)) expect(sent.length).toBeGreaterThanOrEqual(1024 * 1024);
    expect((await unzstd(Buffer.concat(sends))).length).toBe(6 * 1024 * 1024);
  });

  it('piped with a stream limit: the backup\'s own bytes go into zstd at most that fast, even when zstd shrinks them to nothing', async () => {
    // 4 MiB of zeros at 2 MiB/s: zstd's output is a few hundred bytes, so holding back its
    // output could never slow the source; the limit must hold on what the backup writes.
    const rawBytes = 4 * 1024 * 1024;
    const limit = 2 * 1024 * 1024;
    const sent: Buffer[] = [];
    const started = performance.now();
    const facts = await sendCompressedPiped(
      async (into, infoDir) => {
        await writeFile(path.join(infoDir, 'xtrabackup_info'), INFO);
        return spawnPiped('head', ['-c', String(rawBytes), '/dev/zero'], { input: 'ignore', output: into, timeoutMs: 30_000 });
      },
      dir,
      async (pieces) => void sent.push(...[pieces].flat()),
      new AbortController().signal,
      limit,
    );
    const seconds = (performance.now() - started) / 1000;
    expect(facts).toEqual({ raw_bytes: rawBytes, gtid_pos: '0-1-547' });
    expect((await unzstd(Buffer.concat(sent))).equals(Buffer.alloc(rawBytes))).toBe(true);
    // The first pipe read (<= 64 KiB) goes out at once; everything after it waits its turn.
    // Slack for the last wait: a timer measures from the event loop's cached clock, which on
    // a loaded machine (the whole unit suite on 2 cores) lags by tens of ms, so it fires that
    // much early (one full run: 1.900 s against 1.969). Unthrottled, the 4 MiB take ~0.02 s.
    expect(seconds).toBeGreaterThanOrEqual((rawBytes - 64 * 1024) / limit - 0.15);
  });

  it('piped: a source that fails fails the transfer, and one without an info file reports why it has no position', async () => {
    const failing = sendCompressedPiped(async (into) => spawnPiped('sh', ['-c', 'printf XBSTCK01; exit 3'], { input: 'ignore', output: into, timeoutMs: 30_000 }), dir, async () => {}, new AbortController().signal);
    await expect(failing).rejects.toThrow(/exited with 3/);
    const failingLimited = sendCompressedPiped(async (into) => spawnPiped('sh', ['-c', 'printf XBSTCK01; exit 3'], { input: 'ignore', output: into, timeoutMs: 30_000 }), dir, async () => {}, new AbortController().signal, 1024 * 1024);
    await expect(failingLimited).rejects.toThrow(/exited with 3/);
    const noInfo = await sendCompressedPiped(async (into) => spawnPiped('mbstream', ['-c', 'ibdata1'], { input: 'ignore', output: into, timeoutMs: 30_000, cwd: dir }), dir, async () => {}, new AbortController().signal);
    expect(noInfo.gtid_pos).toBeUndefined();
    expect(noInfo.problem).toMatch(/wrote no info file/);
  });

  it('reads the position of an info file and the sizes of zstd\'s summary', () => {
    expect(gtidOfBackupInfo(INFO)).toBe('0-1-547');
    expect(gtidOfBackupInfo("binlog_pos = filename 'mariadb-bin.000001', position '329', GTID of the last change ''\n")).toBe('');
    expect(gtidOfBackupInfo("binlog_pos = filename 'b.1', position '9', GTID of the last change '0-1-5,1-2-9'\n")).toBe('0-1-5,1-2-9');
    expect(gtidOfBackupInfo('tool_name = mariabackup\n')).toBeUndefined();
    expect(gtidOfBackupInfo("binlog_pos = filename 'b.1', position '9', GTID of the last change 'junk'\n")).toBeUndefined();
    expect(rawBytesOfZstdSummary('/*stdin*\\            : 41.67%   (120000000 B => 50003543 B, /*stdout*\\) \n')).toBe(120000000);
    expect(rawBytesOfZstdSummary('/*stdin*\\            :  0.05%   (1048638 B =>    571 B, /*stdout*\\) \n')).toBe(1048638);
    expect(rawBytesOfZstdSummary('/*stdin*\\ : 41.67%   (   114 MiB =>   47.7 MiB, /*stdout*\\)')).toBeUndefined();
  });

  it('carries the facts in the end frame, and refuses a compression it does not know', () => {
    const reader = new FrameReader();
    reader.push(endFrame({ code: 0, details: '', backup: { raw_bytes: 123, gtid_pos: '0-1-42' } }));
    expect(reader.trailer).toEqual({ code: 0, details: '', backup: { raw_bytes: 123, gtid_pos: '0-1-42' } });
    expect(() => new FrameReader().push(endFrame({ code: 0, details: '', backup: { raw_bytes: -1 } }))).toThrow(/malformed/);
    expect(checkCompression('', 'c')).toBe('');
    expect(checkCompression(undefined, 'c')).toBe('');
    expect(checkCompression('zstd', 'c')).toBe('zstd');
    expect(() => checkCompression('gzip', 'compression')).toThrow(/compression "gzip"/);
  });
});
