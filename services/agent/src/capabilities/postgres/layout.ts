// Where a compute instance lives and what the agent remembers about it. The agent keeps
// one registry file per instance (<stateDir>/postgres/<port>.json, never a password), so
// every command after install names the instance by its port alone, also after an agent restart.

import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AgentFailure } from '@kcm/agent-api';

/** The initdb superuser; reached only over the instance's unix socket, by peer auth. */
export const ADMIN_ROLE = 'postgres';
/** The OS user that owns the data directory and runs the server. */
export const POSTGRES_OS_USER = 'postgres';

const PG_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_$]{0,62}$/;
// sockaddr_un.sun_path is 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH = 107;

export interface PostgresInstance {
  port: number;
  hostaddr: string;
  datadir: string;
  /** The compute node's account. */
  user: string;
  /** Settings given at install or by SetPostgresVariables (written to kcm-variables.conf). */
  variables: Record<string, string>;
  /** Databases the catalog sync has put foreign tables in; rescanned on every sync so drops are seen. */
  catalogDatabases: string[];
  /**
   * The op_id of the install that created the data directory (recorded before initdb). A
   * retry of that op may continue a half-done install; any other install finds a data
   * directory it did not create and sets it aside (lifecycle.ts). Absent in older records.
   */
  createdByOp?: string;
  /**
   * The engine version it runs (capabilities/engines), e.g. "15.18": start, restarts and
   * the catalog tools use that version's directory. Absent in records written before
   * engines were versioned: those run the system-wide PostgreSQL they were installed with.
   */
  engineVersion?: string;
  /** An UpgradePostgresEngine under way (engine-upgrade.ts): its op and the version measured before it. */
  engineUpgrade?: { opId: string; versionBefore: string };
}

export function validatePort(port: number): number {
  if (!Number.isInteger(port) || port < 1024 || port > 65535) throw new AgentFailure('invalid_argument', `port ${port} must be an integer in 1024..65535`);
  return port;
}

/** PostgreSQL identifiers kcm creates (roles, databases, schemas, tables): plain names only. */
export function validateIdentifier(kind: string, name: string): string {
  if (!PG_IDENTIFIER.test(name)) throw new AgentFailure('invalid_argument', `${kind} ${JSON.stringify(name)} is not a valid identifier ([A-Za-z_][A-Za-z0-9_$]*, at most 63 characters)`);
  return name;
}

export function isIdentifier(name: string): boolean {
  return PG_IDENTIFIER.test(name);
}

export function instanceDatadir(compDatadir: string, port: number): string {
  if (!path.isAbsolute(compDatadir) || path.normalize(compDatadir) !== compDatadir.replace(/\/+$/, '')) {
    throw new AgentFailure('invalid_argument', `comp_datadir ${JSON.stringify(compDatadir)} must be an absolute, normalised path`);
  }
  if (compDatadir === '/') throw new AgentFailure('invalid_argument', 'comp_datadir must not be /');
  const datadir = path.join(compDatadir, String(port));
  const socket = path.join(datadir, `.s.PGSQL.${port}`);
  if (Buffer.byteLength(socket) > MAX_SOCKET_PATH) throw new AgentFailure('invalid_argument', `socket path ${socket} is longer than ${MAX_SOCKET_PATH} bytes; use a shorter comp_datadir`);
  return datadir;
}

/** The unix socket directory is the data directory itself: private to the instance, no /tmp clashes. */
export function socketDir(instance: PostgresInstance): string {
  return instance.datadir;
}

export class InstanceRegistry {
  constructor(private readonly dir: string) {}

  private file(port: number): string {
    return path.join(this.dir, `${validatePort(port)}.json`);
  }

  async find(port: number): Promise<PostgresInstance | undefined> {
    try {
      return JSON.parse(await readFile(this.file(port), 'utf8')) as PostgresInstance;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async get(port: number): Promise<PostgresInstance> {
    const found = await this.find(port);
    if (!found) throw new AgentFailure('not_found', `no PostgreSQL instance is installed on port ${port} by this agent`);
    return found;
  }

  async save(instance: PostgresInstance): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const tmp = `${this.file(instance.port)}.tmp`;
    await writeFile(tmp, JSON.stringify(instance, null, 2), { mode: 0o600 });
    await rename(tmp, this.file(instance.port));
  }

  async delete(port: number): Promise<void> {
    await rm(this.file(port), { force: true });
  }
}

/** Commands on one instance run one at a time (an install racing a stop would leave either half done). */
export class InstanceLocks {
  private readonly tails = new Map<number, Promise<unknown>>();

  run<T>(port: number, work: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(port) ?? Promise.resolve();
    const next = previous.catch(() => {}).then(work);
    this.tails.set(port, next);
    const cleanup = () => {
      if (this.tails.get(port) === next) this.tails.delete(port);
    };
    next.then(cleanup, cleanup);
    return next;
  }
}
