/**
 * Who may run which job: the role each job type requires, defined once. The gateway
 * refuses a request whose token's role is below it (FORBIDDEN, HTTP 403), the CLI's help
 * shows it, the README's job table lists it, and the tests read it from here.
 *
 * Roles are ordered: viewer < operator < admin; a role may run every job of the roles
 * below it.
 * - viewer: queries and get_status (reads only).
 * - operator: plus machine and cluster jobs (what runs the databases day to day).
 * - admin: plus raft_mission (the manager group itself), backup storage, and tokens.
 */
import type { JobType } from './job-types';

export const ROLES = ['viewer', 'operator', 'admin'] as const;
export type Role = (typeof ROLES)[number];

/**
 * The authenticated caller of one request: the name of the token it presented and that
 * token's role. A member that forwards a request to its leader sends this along; the
 * leader applies this role (it trusts the forwarding member: the channel between members
 * is mutual TLS). Recorded on the job (submittedBy) and in the audit trail.
 */
export interface Identity {
  /** The token's name (never the token). */
  name: string;
  role: Role;
}

/** Every job type with the least role that may run it; the compiler checks it is exhaustive. */
export const REQUIRED_ROLE = Object.freeze({
  get_status: 'viewer',
  create_machine: 'operator',
  delete_machine: 'operator',
  set_machine: 'operator',
  create_cluster: 'operator',
  delete_cluster: 'operator',
  add_shards: 'operator',
  delete_shards: 'operator',
  add_comps: 'operator',
  delete_comp: 'operator',
  add_nodes: 'operator',
  delete_nodes: 'operator',
  rebuild_node: 'operator',
  update_instance_cgroup: 'operator',
  manual_backup_cluster: 'operator',
  cluster_restore: 'operator',
  logical_backup: 'operator',
  logical_restore: 'operator',
  get_expand_table_list: 'viewer',
  expand_cluster: 'operator',
  repartition_tables: 'operator',
  get_meta_mode: 'viewer',
  get_backup_storage: 'viewer',
  get_machine_summary: 'viewer',
  get_cluster_summary: 'viewer',
  get_cluster_detail: 'viewer',
  get_variable: 'viewer',
  raft_mission: 'admin',
  manual_switch: 'operator',
  set_noswitch: 'operator',
  create_backup_storage: 'admin',
  delete_backup_storage: 'admin',
  rotate_backup_key: 'admin',
  create_token: 'admin',
  delete_token: 'admin',
  cancel_job: 'operator',
  list_tokens: 'admin',
  get_audit: 'admin',
  list_jobs: 'viewer',
  // admin, not operator: the result shows the new storage and computer passwords to its
  // submitter, so an operator could otherwise read any cluster's passwords by rotating them,
  // and those are shown only to the cluster's creator and to admins.
  rotate_cluster_passwords: 'admin',
  upgrade_cluster: 'operator',
  set_backup_policy: 'operator',
  delete_backup_policy: 'operator',
  run_restore_drill: 'operator',
} as const satisfies Record<JobType, Role>);

/** A token's name: what logs, job records and the audit trail show instead of the token. */
export const TOKEN_NAME_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;
export const TOKEN_NAME_RULE = 'must be 1-64 ASCII letters, digits, _ . or - (not starting with . or -)';

const RANK: Readonly<Record<Role, number>> = { viewer: 0, operator: 1, admin: 2 };

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}

/** True when `role` may run jobs that require `required`. */
export function roleAllows(role: Role, required: Role): boolean {
  return RANK[role] >= RANK[required];
}

/** Why `identity` may not run `jobType`, or null when it may. */
export function forbiddenReason(identity: Identity, jobType: JobType): string | null {
  const required = REQUIRED_ROLE[jobType];
  if (roleAllows(identity.role, required)) return null;
  return `token "${identity.name}" has role ${identity.role}; ${jobType} requires role ${required} or above`;
}
