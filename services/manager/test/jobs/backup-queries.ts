// The backup queries as the gateway serves them, without the cluster queries' live probes.
import type { QueryHandler } from '../../src/submit/manager-service';
import { backupStorageList } from '../../src/queries/backups';

export const backupQueriesFor = () => new Map<string, QueryHandler>([['get_backup_storage', (_req, state) => backupStorageList(state)]]);
