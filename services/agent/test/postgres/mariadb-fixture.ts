// A throwaway MariaDB server for tests that need a real shard: its own datadir, socket,
// pid file and tmpdir under the test's folder, on a loopback address and port of the
// test's choosing. Started and killed by the test itself, not through an agent.

import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';

const run = promisify(execFile);

export interface ThrowawayMariadb {
  host: string;
  port: number;
  /** Root over TCP with this password (anonymous users dropped). */
  rootPassword: string;
  connect(database?: string): Promise<mysql.Connection>;
  stop(): Promise<void>;
}

/** Listens on every address of `addresses` (MariaDB 10.11 takes a list); clients use the first. */
export async function startThrowawayMariadb(dir: string, addresses: string[], port: number): Promise<ThrowawayMariadb> {
  const host = addresses[0];
  const datadir = path.join(dir, 'data');
  const tmpdir = path.join(dir, 'tmp');
  await mkdir(tmpdir, { recursive: true });
  await run('mariadb-install-db', [`--datadir=${datadir}`, '--auth-root-authentication-method=normal', '--user=root', '--skip-test-db'], { timeout: 60_000 });
  const socket = path.join(dir, 'mysqld.sock');
  const child: ChildProcess = spawn(
    'mariadbd',
    [
      '--no-defaults', `--datadir=${datadir}`, `--port=${port}`, `--bind-address=${addresses.join(',')}`, `--socket=${socket}`,
      `--pid-file=${path.join(dir, 'mysqld.pid')}`, `--tmpdir=${tmpdir}`, '--user=root', '--skip-name-resolve',
      '--innodb-buffer-pool-size=32M', '--innodb-log-file-size=16M', `--log-error=${path.join(dir, 'error.log')}`,
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const rootPassword = 'root-pw-for-tests';
  let admin: mysql.Connection | undefined;
  for (let i = 0; i < 300 && !admin; i++) {
    if (child.exitCode !== null) throw new Error(`mariadbd exited with ${child.exitCode}; see ${path.join(dir, 'error.log')}`);
    admin = await mysql.createConnection({ socketPath: socket, user: 'root' }).catch(() => undefined);
    if (!admin) await new Promise((r) => setTimeout(r, 100));
  }
  if (!admin) {
    child.kill('SIGKILL');
    throw new Error('mariadbd did not accept connections within 30 s');
  }
  // Anonymous users, and the password-less root@127.0.0.1/::1/<hostname> that mariadb-install-db makes,
  // would match TCP logins before root@'%'.
  const [extra] = await admin.query("SELECT User AS user, Host AS host FROM mysql.global_priv WHERE User = '' OR (User = 'root' AND Host <> 'localhost')");
  for (const { user, host: h } of extra as { user: string; host: string }[]) await admin.query('DROP USER ?@?', [user, h]);
  await admin.query('CREATE USER ?@? IDENTIFIED BY ?', ['root', '%', rootPassword]);
  await admin.query('GRANT ALL ON *.* TO ?@? WITH GRANT OPTION', ['root', '%']);
  await admin.query('FLUSH PRIVILEGES');
  await admin.end();
  return {
    host,
    port,
    rootPassword,
    connect: (database) => mysql.createConnection({ host, port, user: 'root', password: rootPassword, database }),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
}
