// The metadata backup (manual_backup_cluster with cluster_id -1) and the start of a brand-new
// manager group from it (kcm-manager --restore-meta).
//
// The stored object is a Raft snapshot image of the metadata state machine (meta/snapshot/image.ts),
// with a `kcm_metadata_backup` header beside `format` and `state`: restoreMeta reads it as
// any snapshot. A new group starts from it as from a snapshot at index 1, term 1, with the
// new group's membership: every seeded member holds the same entry, so they agree from the
// first election on. What was running at backup time is all there (machines, clusters,
// kept jobs; unfinished jobs resume), except the backup job itself, which is closed as done.

import { readFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { LevelStorage } from '@kcm/raft';
import { applyCommand } from '../meta/fsm';
import { CommandKind } from '../meta/commands';
import { restoreMeta, snapshotMeta } from '../meta/snapshot/image';
import type { MetaState } from '../meta/state';

export interface MetadataBackupInfo {
  backupJobId: string;
  /** The Raft index the state was taken at on the old group. */
  appliedIndex: number;
  takenAt: number;
}

/** The bytes of a metadata backup: a snapshot image of `state` that also names the backup. */
export function metadataBackupImage(state: MetaState, info: MetadataBackupInfo): Buffer {
  const snapshot = snapshotMeta(state);
  // snapshotMeta writes one JSON object, `{"format":..,"state":..}`: the header goes in front of its fields.
  return Buffer.concat([Buffer.from(`{"kcm_metadata_backup":${JSON.stringify(info)},`), Buffer.from(snapshot.buffer, snapshot.byteOffset, snapshot.byteLength).subarray(1)]);
}

export interface RestoredMetadata {
  info: MetadataBackupInfo;
  state: MetaState;
  /** The snapshot image the new group starts from. */
  image: Uint8Array;
}

/** Reads a metadata backup and closes its own backup job (it finished by being taken). */
export function readMetadataBackup(bytes: Uint8Array): RestoredMetadata {
  let info: MetadataBackupInfo | undefined;
  try {
    info = (JSON.parse(new TextDecoder().decode(bytes)) as { kcm_metadata_backup?: MetadataBackupInfo }).kcm_metadata_backup;
  } catch (err) {
    throw new Error(`not a kcm metadata backup: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (!info || typeof info.backupJobId !== 'string') throw new Error('not a kcm metadata backup: no kcm_metadata_backup header');
  const state = restoreMeta(bytes);
  const job = state.jobs[info.backupJobId];
  if (job && !job.result) {
    applyCommand(state, {
      kind: CommandKind.JobFinished,
      at: info.takenAt,
      jobId: info.backupJobId,
      outcome: { ok: true, errorCode: 0, errorInfo: 'the metadata was restored from this backup', attachment: { backup_id: info.backupJobId, cluster_id: '-1', applied_index: String(info.appliedIndex) } },
    });
  }
  return { info, state, image: snapshotMeta(state) };
}

/**
 * The backup's bytes from a file. When the storage's manifest lies beside it (the file was
 * taken straight from an fs storage: `<path>/<key>` and `<path>/<key>.manifest.json`), its
 * sha256 must match: an altered backup is refused before anything is written.
 */
export async function readMetadataBackupFile(file: string): Promise<Uint8Array> {
  const bytes = await readFile(file);
  const manifest = await readFile(`${file}.manifest.json`, 'utf8').then(
    (text) => JSON.parse(text) as { sha256: string; bytes: number },
    () => undefined,
  );
  if (manifest) {
    const actual = createHash('sha256').update(bytes).digest('hex');
    if (actual !== manifest.sha256 || bytes.length !== manifest.bytes) {
      throw new Error(`${file} does not match its manifest (sha256 ${actual}, ${bytes.length} bytes; manifest ${manifest.sha256}, ${manifest.bytes} bytes): refused`);
    }
  }
  return bytes;
}

/**
 * Seeds the Raft storage of a member of a brand-new group with the backup as its first
 * snapshot (index 1, term 1, `voters` the new group). Refuses a directory that already
 * holds Raft state: a restore never overwrites a running group's log.
 */
export async function seedRaftStorage(raftDir: string, voters: string[], restored: RestoredMetadata): Promise<void> {
  const storage = await LevelStorage.open(raftDir);
  try {
    const initial = storage.initialState();
    if (storage.lastIndex() > 0 || initial.hardState.term > 0 || initial.confState.voters.length > 0) {
      throw new Error(`${raftDir} already holds Raft state; --restore-meta starts a brand-new group only (use an empty dataDir)`);
    }
    await storage.persist(
      {
        snapshot: { meta: { index: 1, term: 1, conf: { voters: [...voters], learners: [] } }, data: restored.image },
        hardState: { term: 1, vote: null, commit: 1 },
      },
      true,
    );
  } finally {
    await storage.close();
  }
}
