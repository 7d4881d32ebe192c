// `kcm-manager --config <file> --restore-meta <backup>`: starts this member of a brand-new
// group from a metadata backup (manual_backup_cluster with cluster_id -1). Run it on every
// member of the new group (each with an empty dataDir and the new group's initialMembers),
// with the same backup; then start them as usual. Stop the old group first: two groups must
// never manage the same agents.
//
// <backup> is a file (the object copied off the storage host, `<path>/<key>`, checked
// against the manifest beside it when present) or the object itself in an fs storage,
// `kcm-fs://<hostaddr>:<port><path>?key=<key>`, fetched from its agent (checked as read).

import path from 'node:path';
import { StorageAgentClient } from '@kcm/agent-api';
import type { Logger } from '@kcm/common';
import type { ManagerConfig } from '../config';
import { readMetadataBackup, readMetadataBackupFile, seedRaftStorage } from './metadata-image';

const STORAGE_URL = /^kcm-fs:\/\/(\[[^\]]+\]|[^:/]+):(\d{1,5})(\/[^?]*)\?key=(.+)$/;

async function fetchFromStorage(url: string): Promise<Uint8Array> {
  const m = STORAGE_URL.exec(url);
  if (!m) throw new Error(`${url} is not kcm-fs://<hostaddr>:<port><path>?key=<key>`);
  const client = new StorageAgentClient(`${m[1]}:${m[2]}`);
  try {
    const parts: Buffer[] = [];
    for await (const part of client.get(m[3], decodeURIComponent(m[4]))) parts.push(part);
    return Buffer.concat(parts);
  } finally {
    client.close();
  }
}

export interface MetaRestoreReport {
  backupJobId: string;
  appliedIndex: number;
  clusters: number;
  machines: number;
  jobs: number;
}

export async function restoreMetaInto(config: ManagerConfig, backup: string, logger: Logger): Promise<MetaRestoreReport> {
  const bytes = backup.startsWith('kcm-fs://') ? await fetchFromStorage(backup) : await readMetadataBackupFile(backup);
  const restored = readMetadataBackup(bytes);
  const voters = config.initialMembers.length > 0 ? config.initialMembers : [config.member];
  await seedRaftStorage(path.join(config.dataDir, 'raft'), voters, restored);
  const report = {
    backupJobId: restored.info.backupJobId,
    appliedIndex: restored.info.appliedIndex,
    clusters: Object.keys(restored.state.clusters).length,
    machines: Object.keys(restored.state.machines).length,
    jobs: Object.keys(restored.state.jobs).length,
  };
  logger.info({ ...report, voters }, 'metadata restored from backup: this member starts a new group from it');
  return report;
}
