// The files kcm writes into a compute instance's data directory. postgresql.conf from
// initdb is kept and ends with two includes: kcm.conf (what kcm decides: addresses,
// socket, auth, logging) and kcm-variables.conf (what the manager asks for). pg_hba.conf
// and pg_ident.conf are replaced.

import { appendFile, chown, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ADMIN_ROLE, socketDir, type PostgresInstance } from './layout';
import { AgentFailure } from '@kcm/agent-api';

const SETTING_NAME = /^[a-z_][a-z0-9_.]{0,62}$/;

/** Settings kcm owns; the manager cannot override them through variables. */
const RESERVED = new Set([
  'listen_addresses', 'port', 'unix_socket_directories', 'unix_socket_permissions', 'data_directory',
  'hba_file', 'ident_file', 'config_file', 'external_pid_file', 'include', 'include_dir', 'include_if_exists',
  'password_encryption', 'log_min_error_statement', 'log_statement', 'shared_preload_libraries',
]);

export const KCM_CONF = 'kcm.conf';
export const VARIABLES_CONF = 'kcm-variables.conf';

function quoteValue(value: string): string {
  if (/[\n\r\0]/.test(value)) throw new AgentFailure('invalid_argument', 'a setting value must be one line');
  return `'${value.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
}

export function validateVariables(variables: Record<string, string>): Record<string, string> {
  for (const [name, value] of Object.entries(variables)) {
    if (!SETTING_NAME.test(name)) throw new AgentFailure('invalid_argument', `setting name ${JSON.stringify(name)} is not valid`);
    if (RESERVED.has(name)) throw new AgentFailure('invalid_argument', `setting ${name} is managed by kcm and cannot be changed`);
    quoteValue(value);
  }
  return variables;
}

/** `ddlHooks`: preload kcm_ddl (ddl-hooks.ts), which lets DROP TABLE name the foreign tables kcm makes. */
export function kcmConf(instance: PostgresInstance, ddlHooks = false): string {
  const lines: Record<string, string> = {
    listen_addresses: instance.hostaddr,
    port: String(instance.port),
    unix_socket_directories: socketDir(instance),
    unix_socket_permissions: '0700',
    password_encryption: 'scram-sha-256',
    // Statements can carry user-mapping passwords: never copy a failed one into the log.
    log_min_error_statement: 'panic',
    log_statement: 'none',
    logging_collector: 'off',
    // A client that goes away mid-statement is noticed within a second, so the statement
    // stops and its shard transactions roll back then, not when the statement would end.
    client_connection_check_interval: '1s',
  };
  if (ddlHooks) lines.shared_preload_libraries = 'kcm_ddl';
  return `# Written by kcm; rewritten on every install.\n${Object.entries(lines).map(([k, v]) => `${k} = ${quoteValue(v)}`).join('\n')}\n`;
}

export function variablesConf(variables: Record<string, string>): string {
  const body = Object.entries(validateVariables(variables)).map(([k, v]) => `${k} = ${quoteValue(v)}`);
  return `# Written by kcm from the manager's variables.\n${body.join('\n')}\n`;
}

/**
 * Only the agent's OS user (mapped to the superuser) comes in over the socket; everyone
 * else, the compute account included, logs in over TCP with scram-sha-256. The superuser
 * has no password and is refused over TCP.
 */
export function pgHbaConf(): string {
  return [
    '# Written by kcm.',
    `local all ${ADMIN_ROLE} peer map=kcm_admin`,
    `host all ${ADMIN_ROLE} 0.0.0.0/0 reject`,
    `host all ${ADMIN_ROLE} ::/0 reject`,
    'host all all 0.0.0.0/0 scram-sha-256',
    'host all all ::/0 scram-sha-256',
    '',
  ].join('\n');
}

export function pgIdentConf(agentOsUser: string): string {
  const users = new Set([agentOsUser, ADMIN_ROLE]);
  return `# Written by kcm: OS users allowed to act as ${ADMIN_ROLE} over the socket.\n${[...users].map((u) => `kcm_admin ${u} ${ADMIN_ROLE}`).join('\n')}\n`;
}

/** Writes kcm's files; the include lines are appended to postgresql.conf once. */
export async function writeInstanceConfig(instance: PostgresInstance, agentOsUser: string, owner: { uid: number; gid: number }, ddlHooks = false): Promise<void> {
  const files: [string, string][] = [
    [KCM_CONF, kcmConf(instance, ddlHooks)],
    [VARIABLES_CONF, variablesConf(instance.variables)],
    ['pg_hba.conf', pgHbaConf()],
    ['pg_ident.conf', pgIdentConf(agentOsUser)],
  ];
  for (const [name, text] of files) await writeOwned(path.join(instance.datadir, name), text, owner);
  const main = path.join(instance.datadir, 'postgresql.conf');
  const current = await readFile(main, 'utf8');
  if (!current.includes(`include '${KCM_CONF}'`)) await appendFile(main, `\n# kcm\ninclude '${KCM_CONF}'\ninclude '${VARIABLES_CONF}'\n`);
}

export async function writeOwned(file: string, text: string, owner: { uid: number; gid: number }): Promise<void> {
  await writeFile(file, text, { mode: 0o600 });
  await chown(file, owner.uid, owner.gid);
}
