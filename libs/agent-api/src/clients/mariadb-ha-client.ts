// The manager's side of the MariaDbHaAgent service. Deadlines are short on purpose: a
// failover has seconds, and an agent that does not answer within them is treated as
// unreachable (AgentUnreachableError) so the caller can fence by metadata instead. The XA
// calls serve the leader's in-doubt resolver, which retries what fails in its next round.

import type * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary, listenToStream } from '../call';
import {
  MariaDbHaAgentService,
  type MariaDbFenceReply,
  type MariaDbHaStatusReply,
  type MariaDbHaWatchBeat,
  type MariaDbHaWatchRequest,
  type MariaDbPromoteReply,
  type MariaDbPromoteRequest,
  type MariaDbRepointReply,
  type MariaDbRepointRequest,
  type MariaDbWaitForGtidReply,
  type MariaDbDecideXaReply,
  type MariaDbFinishXaReply,
  type MariaDbFinishXaRequest,
  type MariaDbListXaReply,
  type MariaDbPruneXaReply,
  type MariaDbPruneXaRequest,
  type MariaDbCutConnectionsReply,
  type MariaDbLeaseRenewal,
  type MariaDbLeaseReply,
  type MariaDbTableChecksumsReply,
  type MariaDbResumeApplyReply,
} from '../contract/mariadb-ha';

export interface MariaDbHaDeadlines {
  /** ReplicationStatus (plus its master connection check). */
  statusMs: number;
  /** Promote, re-point, fence (a fence may wait for a clean shutdown). */
  commandMs: number;
  /**
   * DecideXa, FinishXa, PruneXaDecisions: a write on a shard master, which may wait for a row
   * lock (DecideXa gives up after 2 s) and for a semi-sync standby's ack (up to 5 s).
   */
  xaMs: number;
}

const DEFAULT_DEADLINES: MariaDbHaDeadlines = { statusMs: 2_000, commandMs: 90_000, xaMs: 15_000 };

export class MariaDbHaAgentClient {
  private readonly client: grpc.Client;
  private readonly deadlines: MariaDbHaDeadlines;

  constructor(readonly address: string, deadlines: Partial<MariaDbHaDeadlines> = {}) {
    this.client = agentClient(MariaDbHaAgentService, address);
    this.deadlines = { ...DEFAULT_DEADLINES, ...deadlines };
  }

  /** Measured now; `checkMasterMs` > 0 also has a standby's agent try a TCP connection to its master. */
  replicationStatus(port: number, checkMasterMs = 0, deadlineMs = this.deadlines.statusMs): Promise<MariaDbHaStatusReply> {
    return this.call('ReplicationStatus', { port, check_master_ms: checkMasterMs }, deadlineMs);
  }

  /**
   * ReplicationStatus of `ports` at once and every intervalMs, as a stream (WatchStatus):
   * `onBeat` for each beat. Settles as AgentClient.watch does (UNIMPLEMENTED from an agent older than it).
   */
  watchStatus(ports: number[], intervalMs: number, onBeat: (beat: MariaDbHaWatchBeat) => void, signal: AbortSignal): Promise<void> {
    const request: MariaDbHaWatchRequest = { ports, interval_ms: intervalMs };
    return listenToStream(this.client, this.address, 'WatchStatus', request, onBeat, signal);
  }

  promote(req: MariaDbPromoteRequest): Promise<MariaDbPromoteReply> {
    return this.call('Promote', req, this.deadlines.commandMs + req.wait_relay_ms);
  }

  repointStandby(req: MariaDbRepointRequest): Promise<MariaDbRepointReply> {
    return this.call('RepointStandby', req, this.deadlines.commandMs);
  }

  /** Read-only now and on every later start; with `stop`, also stopped and kept stopped. */
  fence(opId: string, port: number, stop: boolean, deadlineMs = this.deadlines.commandMs): Promise<MariaDbFenceReply> {
    return this.call('Fence', { op_id: opId, port, stop }, deadlineMs);
  }

  /** Renews the leader's lease on this host's masters (RenewMasterLeases); a short deadline: a late renewal is no renewal. */
  renewMasterLeases(renewal: MariaDbLeaseRenewal, deadlineMs = this.deadlines.statusMs): Promise<MariaDbLeaseReply> {
    return this.call('RenewMasterLeases', renewal, deadlineMs);
  }

  /** Closes this host's TCP connections to host:port (a fenced old master). */
  cutConnectionsTo(host: string, port: number): Promise<MariaDbCutConnectionsReply> {
    return this.call('CutConnectionsTo', { host, port }, this.deadlines.statusMs);
  }

  waitForGtid(port: number, gtid: string, timeoutMs: number): Promise<MariaDbWaitForGtidReply> {
    return this.call('WaitForGtid', { port, gtid, timeout_ms: timeoutMs }, timeoutMs + this.deadlines.statusMs);
  }

  /** The kcm XA branches prepared on the instance (ListPreparedXa). */
  listPreparedXa(port: number): Promise<MariaDbListXaReply> {
    return this.call('ListPreparedXa', { port }, this.deadlines.statusMs);
  }

  /** The transaction's decision on its coordinator shard's master; `abort` written when none was. */
  decideXa(port: number, gtrid: string): Promise<MariaDbDecideXaReply> {
    return this.call('DecideXa', { port, gtrid }, this.deadlines.xaMs);
  }

  /** XA COMMIT (commit) or XA ROLLBACK of one branch; one already ended is success. */
  finishXa(req: MariaDbFinishXaRequest): Promise<MariaDbFinishXaReply> {
    return this.call('FinishXa', req, this.deadlines.xaMs);
  }

  /** Deletes decision rows older than `older_than_seconds` but those of `keep_gtrids`. */
  pruneXaDecisions(req: MariaDbPruneXaRequest): Promise<MariaDbPruneXaReply> {
    return this.call('PruneXaDecisions', req, this.deadlines.xaMs);
  }

  /**
   * Each user table's row count and CHECKSUM TABLE; with holdApply a standby's applying is
   * stopped first (end it with resumeApply). Reads every row: the command deadline.
   */
  tableChecksums(port: number, holdApply: boolean): Promise<MariaDbTableChecksumsReply> {
    return this.call('TableChecksums', { port, hold_apply: holdApply }, this.deadlines.commandMs);
  }

  /** START SLAVE SQL_THREAD after a hold; idempotent. */
  resumeApply(port: number): Promise<MariaDbResumeApplyReply> {
    return this.call('ResumeApply', { port }, this.deadlines.commandMs);
  }

  close(): void {
    this.client.close();
  }

  private call<Res>(method: string, request: object, deadlineMs: number): Promise<Res> {
    return callUnary<Res>(this.client, this.address, method, request, deadlineMs);
  }
}
