// Manager configuration: one JSON file per member (see deploy/config/manager-m1.json).

import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ROLES, TOKEN_NAME_PATTERN, TOKEN_NAME_RULE, parsePeer } from '@kcm/protocol';

const member = z.string().refine((s) => parsePeer(s).ok, { message: 'must be <host>:<port>' });

// Strict: a misspelt key ("dataDirr") is refused by name instead of being ignored while its
// default silently applies.
export const managerConfigSchema = z.strictObject({
  /**
   * This member's identity and HTTP address, `<host>:<port>`: the gateway listens here and
   * the Raft transport on the next port (port + 1). raft_mission names members this way.
   */
  member,
  dataDir: z.string().min(1),
  /**
   * Seeds a brand-new group only (raft_group_member_init_config). Afterwards membership
   * lives in the Raft log and changes only through raft_mission; this list is ignored.
   */
  initialMembers: z.array(member).default([]),
  /** Start with no membership and wait to be added by add_peer. */
  join: z.boolean().default(false),
  agentPort: z.number().int().min(1).max(65535).default(58100),
  /**
   * Emit tokens known from the config (a bootstrap admin, so a brand-new group is
   * reachable): name, role and the hex SHA-256 of the token, never the token itself.
   * More tokens live in the replicated state (create_token). See gateway/auth.ts.
   */
  tokens: z
    .array(
      z.strictObject({
        name: z.string().regex(TOKEN_NAME_PATTERN, TOKEN_NAME_RULE),
        role: z.enum(ROLES),
        sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be the hex SHA-256 of the token (64 lowercase hex digits)'),
      }),
    )
    .default([]),
  /**
   * Serve Emit without authentication (every caller as an admin), keep internal links in
   * plaintext and passwords unsealed. Only for a throw-away setup: the manager logs a
   * warning on every start. (Also `kcm-manager --insecure`.)
   */
  insecure: z.boolean().default(false),
  machineDeadAfterMs: z.number().int().positive().default(30_000),
  healthIntervalMs: z.number().int().positive().default(2_000),
  /**
   * How often the leader asks each host's agent for its facts (free disk of each registered
   * directory, memory, cores; leader/host-facts-refresher.ts). A change big enough to matter is
   * recorded and placement uses it from then on.
   */
  hostFactsIntervalMs: z.number().int().positive().default(30_000),
  /** How often the leader checks that every instance of a live cluster runs (leader/instance-reconciler.ts). */
  reconcileIntervalMs: z.number().int().positive().default(5_000),
  /** How often the leader archives shard masters' closed binlogs (leader/binlog-archiver.ts): the RPO of a point-in-time restore. */
  binlogArchiveIntervalMs: z.number().int().positive().default(5_000),
  /** How often the leader retries the rollbacks failed jobs could not finish (leader/rollback-finisher.ts). */
  rollbackRetryIntervalMs: z.number().int().positive().default(3_000),
  /**
   * How often the leader probes every shard master (leader/shard-failure-detector.ts), and how long
   * a master must stay unreachable (with its standbys agreeing) before it is failed over. A
   * dead mariadbd is failed over on the first probe that sees it; with these defaults and a
   * ~2 s failover job, a master is replaced within the 5 s target.
   */
  failureDetectIntervalMs: z.number().int().positive().default(500),
  failureGraceMs: z.number().int().min(0).default(1000),
  /** The leader's lease on each shard master (ms): a master cut off from the managers and a standby for this long is fenced by its own agent (leader/master-leases.ts). */
  masterLeaseMs: z.number().int().min(500).max(60_000).default(3000),
  /**
   * Two-phase commit through compute nodes (leader/in-doubt-resolver.ts): how often the leader lists
   * the XA branches prepared on every shard master, and how long a branch must stay prepared
   * before it is in doubt and ended by its coordinator shard's decision (no decision: abort).
   * A compute node commits its branches within milliseconds of preparing them; the timeout
   * bounds how long a crashed one's branches hold their row locks.
   */
  xaResolveIntervalMs: z.number().int().positive().default(1_000),
  xaInDoubtAfterMs: z.number().int().positive().default(3_000),
  tickMs: z.number().int().positive().default(100),
  electionTick: z.number().int().min(2).default(10),
  snapshotEntries: z.number().int().min(0).default(10_000),
  /**
   * Finished jobs kept in the job history (get_status answers for them; their request_ids
   * still find them). The oldest finished beyond it are dropped; unfinished jobs never.
   * The leader's value goes into each JobFinished entry, so members never disagree.
   */
  finishedJobsKept: z.number().int().min(1).default(10_000),
  /**
   * manual_switch refuses a standby more transactions behind its master than this (by GTID
   * sequence), before holding any write: catching up is what the write stall is made of.
   */
  manualSwitchMaxBehindTrx: z.number().int().min(0).default(1_000),
  /** How long manual_switch holds writes waiting for the standby to catch up before it gives up and lets them go. */
  manualSwitchCatchUpMs: z.number().int().positive().default(5_000),
  /**
   * A master change (manual_switch, failover) holds the shard on every compute node first:
   * statements for it wait there, at most this long (the hold's own deadline on the compute
   * node, so a manager that dies mid-switch never wedges one), instead of failing (docs/ride-through.md).
   */
  switchHoldMs: z.number().int().positive().max(120_000).default(10_000),
  /** A planned switch gives transactions already open on the shard this long to end before it ends them. */
  switchDrainMs: z.number().int().min(0).max(60_000).default(1_000),
  /** Table moves (expand_cluster, repartition_tables): rows per copy chunk (one target transaction each). */
  moveChunkRows: z.number().int().min(1).max(100_000).default(2_000),
  /** Table moves: the copy's rate limit in rows/s (0 = none), so the shards' own traffic is not starved. */
  moveCopyRowsPerSecond: z.number().int().min(0).default(0),
  /** Table moves: the copy waits while a standby of the target shard is more transactions behind its master than this. */
  moveMaxTargetLagTrx: z.number().int().min(0).default(20),
  /**
   * Transfer limit of each shard's stream in a full backup, MB/s (0 = none), so the shard's own
   * traffic is not starved. None by default: a limit makes the source agent relay every
   * uncompressed byte (about 10 s of its CPU per GB, 0.49x of a raw copy in bench:backup at
   * 100 MB/s, a rate that shard never reached), where without one mariabackup writes straight
   * into zstd. Set it on hosts whose disks the backup would otherwise saturate.
   */
  backupPvLimitMb: z.number().int().min(0).default(0),
  /**
   * How full backups are stored: 'zstd' (compressed at the source with `zstd -1`, so fewer
   * bytes cross TLS, the checksum and the disk; restores decompress) or 'none'. Sets record
   * theirs, so a set taken either way restores.
   */
  backupCompression: z.enum(['zstd', 'none']).default('zstd'),
  /** A standby lagging more than this (seconds) is not a full backup's source; the master is used only when no standby qualifies. */
  backupMaxReplicaDelayS: z.number().int().min(0).default(60),
  /**
   * Engine versions of a create_cluster that names none (docs/engine-versions.md), e.g.
   * "10.11.19" and "15.20". '' (the default): the version each chosen host has installed from
   * Debian (the first host's, then the same on every other), which its apt sources still
   * carry; a pinned version stops being fetchable once Debian replaces it in the archive.
   */
  defaultStorageVersion: z.string().regex(/^(\d+\.\d+\.\d+)?$/, 'a MariaDB version like 10.11.19, or empty').default(''),
  defaultComputerVersion: z.string().regex(/^(\d+\.\d+)?$/, 'a PostgreSQL version like 15.20, or empty').default(''),
  /**
   * 32 random bytes (mode 0600), the same file on every member: generated database passwords
   * are sealed with it (AES-256-GCM) before they enter the Raft log (secrets/secret-box.ts).
   * Required unless `insecure`. A metadata backup restores only with the same key.
   */
  secretsKeyFile: z.string().min(1).optional(),
  /**
   * Limits (gateway/rate-limit.ts): Emit requests each caller (its token; its address where
   * no token is configured) may send per second on one member, with bursts up to
   * emitRateBurst; above it the reply is OVERLOADED (HTTP 429). 0 turns the limit off.
   */
  emitRatePerSecond: z.number().min(0).default(5_000),
  emitRateBurst: z.number().int().min(1).default(10_000),
  /** Unfinished jobs (queued or running) one cluster may have; another is refused OVERLOADED. */
  maxJobsPerCluster: z.number().int().min(1).default(32),
  /**
   * Mutual TLS of the Raft/forward port and of the calls to agents: the cluster CA bundle
   * and this member's `manager`-role certificate and key (deploy/tls/README.md). Required
   * unless `insecure` is true.
   */
  tls: z.object({ ca: z.string().min(1), cert: z.string().min(1), key: z.string().min(1) }).strict().optional(),
  /**
   * The certificate and key Emit and the console serve HTTPS with (a supplied certificate,
   * e.g. of a public CA). Absent: this member's own `tls.cert`/`tls.key`, which the cluster
   * CA issued for its host. Reloaded when the files change (docs/https.md).
   */
  https: z.object({ cert: z.string().min(1), key: z.string().min(1) }).strict().optional(),
  /**
   * Serve Emit and the console over plain HTTP instead of HTTPS: bearer tokens and returned
   * passwords then cross the network in clear. `insecure` implies it.
   */
  plainHttp: z.boolean().default(false),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type ManagerConfig = z.infer<typeof managerConfigSchema>;

export function parseManagerConfig(raw: unknown, source = 'config'): ManagerConfig {
  const parsed = managerConfigSchema.safeParse(raw);
  if (!parsed.success) {
    // A misspelt key first: its unknown name usually explains the "required" that follows it.
    const issues = [...parsed.error.issues].sort((a, b) => Number(b.code === 'unrecognized_keys') - Number(a.code === 'unrecognized_keys'));
    throw new Error(`${source}: ${issues.map(describeIssue).join('; ')}`);
  }
  const config = parsed.data;
  if (!config.join && config.initialMembers.length > 0 && !config.initialMembers.includes(config.member)) {
    throw new Error(`${source}: initialMembers must include member ${config.member} (or set join: true)`);
  }
  return config;
}

/** One config problem, naming its key: `agentPort: Too big: ...`, `unknown key "dataDirr" (did you mean dataDir?)`. */
function describeIssue(issue: z.core.$ZodIssue): string {
  const where = issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys') {
    const known = issue.path.length === 0 ? Object.keys(managerConfigSchema.shape) : [];
    return issue.keys
      .map((key) => {
        const near = known.find((k) => k.toLowerCase() === key.toLowerCase() || editDistance(k, key) <= 2);
        return `unknown key ${JSON.stringify(where ? `${where}.${key}` : key)}${near ? ` (did you mean ${near}?)` : ''}`;
      })
      .join('; ');
  }
  if (issue.code === 'invalid_type' && issue.input === undefined) return `${where}: required, missing`;
  return `${where || '(root)'}: ${issue.message}`;
}

/** Levenshtein distance, for the "did you mean" of a misspelt key. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = current;
  }
  return previous[b.length];
}

/** Reads and checks a config file; every failure is an Error whose message names the file and the problem. */
export function loadManagerConfig(file: string): ManagerConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`config ${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new Error(`config ${file}: not valid JSON (${(err as Error).message})`);
  }
  return parseManagerConfig(raw, `config ${file}`);
}
