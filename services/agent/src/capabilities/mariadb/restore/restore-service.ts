// Registers the MariaDbRestoreAgent service (proto/agent-mariadb-restore.proto) beside the
// MariaDbAgent one, sharing its per-port serialiser and op ledger: a restore and a stop or
// rebuild of the same instance must not interleave, and a retried op_id returns the first
// attempt's result.

import type * as grpc from '@grpc/grpc-js';
import type { Logger } from '@kcm/common';
import type { AgentContext } from '../../../capability';
import { unary } from '../../../grpc-unary';
import { MariaDbRestoreAgentService, type MariaDbArchiveBinlogRequest, type MariaDbDropClusterDatabasesRequest, type MariaDbListBinlogsRequest, type MariaDbReplayBinlogsRequest, type MariaDbRestoreFullBackupRequest } from '@kcm/agent-api';
import { archiveBinlog, streamBinlogHandler } from './binlog-archive';
import { listBinlogs } from './binlog-files';
import { checkPort } from '../instance/instance-layout';
import { layoutOf } from '../instance/lifecycle';
import { restoreFullBackup } from './restore-backup';
import { dropClusterDatabases, replayBinlogs } from './restore-replay';

export interface RestoreServiceDeps {
  /** Runs a state-changing command once per op_id, serialised with the instance's other commands. */
  once<T>(kind: string, opId: string, port: number, operation: () => Promise<T>): Promise<T>;
  /** Marks the instance wanted running once the command succeeded (the supervisor keeps it so). */
  runningAfter<T>(port: number | undefined, command: () => Promise<T>): Promise<T>;
}

export function registerRestoreService(server: grpc.Server, ctx: AgentContext, log: Logger, deps: RestoreServiceDeps): void {
  const logged = { ...ctx, logger: log };
  server.addService(MariaDbRestoreAgentService.service, {
    ListBinlogs: unary(log, 'MariaDbRestore.ListBinlogs', async (req: MariaDbListBinlogsRequest) => listBinlogs(await layoutOf(ctx, checkPort(req.port)), req.flush)),
    StreamBinlog: streamBinlogHandler(logged),
    ArchiveBinlog: unary(log, 'MariaDbRestore.ArchiveBinlog', (req: MariaDbArchiveBinlogRequest) => archiveBinlog(logged, req)),
    RestoreFullBackup: unary(log, 'MariaDbRestore.RestoreFullBackup', (req: MariaDbRestoreFullBackupRequest) =>
      deps.once('restore', req.op_id, req.spec?.port ?? 0, () => deps.runningAfter(req.spec?.port, () => restoreFullBackup(logged, req))),
    ),
    DropClusterDatabases: unary(log, 'MariaDbRestore.DropClusterDatabases', (req: MariaDbDropClusterDatabasesRequest) =>
      deps.once('drop-databases', req.op_id, req.port, async () => dropClusterDatabases(await layoutOf(ctx, checkPort(req.port)))),
    ),
    ReplayBinlogs: unary(log, 'MariaDbRestore.ReplayBinlogs', (req: MariaDbReplayBinlogsRequest) => deps.once('replay', req.op_id, req.port, () => replayBinlogs(logged, req))),
  });
}
