// What a storage node needs free in its directories before an install or a rebuild writes
// them (INSTALL_MIN_FREE_BYTES; the wal_log_dir also holds the whole redo log, whose size
// is my.cnf's innodb_log_file_size), and the guard every such write runs under.

import { INSTALL_MIN_FREE_BYTES, storageWalDirNeed, type MariaDbInstanceSpec } from '@kcm/agent-api';
import type { AgentContext } from '../../../capability';
import { namingFullDisk, requireFreeSpace, type DirNeed } from '../../../ops/disk-space';
import { instanceLayout } from './instance-layout';
import { renderMyCnf } from './my-cnf';

const UNIT = { K: 2 ** 10, M: 2 ** 20, G: 2 ** 30 } as const;

/** The redo log size the instance's my.cnf sets (innodb_log_file_size), in bytes. */
export function redoLogBytes(spec: MariaDbInstanceSpec): number {
  const m = /^innodb_log_file_size = (\d+)([KMG])?$/m.exec(renderMyCnf(spec, instanceLayout(spec), '127.0.0.1'));
  if (!m) throw new Error('my.cnf sets no innodb_log_file_size');
  return Number(m[1]) * (m[2] ? UNIT[m[2] as keyof typeof UNIT] : 1);
}

export function storageNodeNeeds(spec: MariaDbInstanceSpec): DirNeed[] {
  return [
    { what: 'datadir', dir: spec.datadir, bytes: INSTALL_MIN_FREE_BYTES.storageDatadir },
    { what: 'logdir', dir: spec.logdir, bytes: INSTALL_MIN_FREE_BYTES.storageLogdir },
    { what: 'wal_log_dir', dir: spec.wal_log_dir, bytes: storageWalDirNeed(redoLogBytes(spec)) },
  ];
}

/**
 * Runs work that writes a storage node's directories: refused before it starts (with
 * `precheck`) when they are short of what a node needs, and a failure on a full disk is
 * reported naming the disk.
 */
export async function withStorageNodeSpace<T>(ctx: AgentContext, spec: MariaDbInstanceSpec, opts: { precheck: boolean }, work: () => Promise<T>): Promise<T> {
  const needs = storageNodeNeeds(spec);
  if (opts.precheck) await requireFreeSpace(ctx.hostaddr, needs);
  return namingFullDisk(ctx.hostaddr, needs, work);
}
