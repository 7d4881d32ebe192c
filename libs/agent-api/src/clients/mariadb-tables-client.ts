// The manager's side of the MariaDbTablesAgent service: table sizes and access counts,
// table definitions, and read-only row probes. Reads only; one client per use (close()
// when done): these calls are rare (a query, a repartition's checks).

import type * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary } from '../call';
import {
  MariaDbTablesAgentService,
  type DescribeTablesReply,
  type ProbeRowsReply,
  type RowProbe,
  type TableRef,
  type TableStatsReply,
} from '../contract/mariadb-tables';

export class MariaDbTablesAgentClient {
  private readonly client: grpc.Client;

  /** `probeMs` bounds a row probe: it scans a whole table. */
  constructor(readonly address: string, private readonly deadlineMs = 15_000, private readonly probeMs = 600_000) {
    this.client = agentClient(MariaDbTablesAgentService, address);
  }

  tableStats(port: number): Promise<TableStatsReply> {
    return callUnary(this.client, this.address, 'TableStats', { port }, this.deadlineMs);
  }

  describeTables(port: number, tables: TableRef[]): Promise<DescribeTablesReply> {
    return callUnary(this.client, this.address, 'DescribeTables', { port, tables }, this.deadlineMs);
  }

  probeRows(port: number, table: TableRef, probes: Partial<RowProbe>[]): Promise<ProbeRowsReply> {
    const full = probes.map((p) => ({ null_column: p.null_column ?? '', duplicate_columns: p.duplicate_columns ?? [], false_check: p.false_check ?? '' }));
    return callUnary(this.client, this.address, 'ProbeRows', { port, table, probes: full }, this.probeMs);
  }

  close(): void {
    this.client.close();
  }
}
