// Loads proto/agent-passwords.proto at run time and states its message shapes as
// proto-loader decodes them (keepCase, longs as numbers, defaults filled). The
// PasswordAgent service: new passwords for a cluster's generated accounts
// (rotate_cluster_passwords).

import { loadAgentService } from '../load-proto';

export const PasswordAgentService = loadAgentService('agent-passwords.proto', 'PasswordAgent');

/** The MariaDB accounts of a storage node a rotation may change. */
export type MariaDbAccountRole = 'admin' | 'replication' | 'storage';

export interface AccountPassword {
  role: string;
  user: string;
  password: string;
}

export interface SetMariaDbPasswordsRequest {
  op_id: string;
  port: number;
  accounts: AccountPassword[];
}

export interface SetMariaDbPasswordsReply {
  roles: string[];
}

export interface SetReplicationPasswordRequest {
  op_id: string;
  port: number;
  user: string;
  password: string;
}

export interface SetReplicationPasswordReply {
  is_replica: boolean;
  master_host: string;
  master_port: number;
  io_running: boolean;
  sql_running: boolean;
}

export interface SetComputePasswordRequest {
  op_id: string;
  port: number;
  user: string;
  password: string;
}

export interface SetComputePasswordReply {
  user: string;
}
