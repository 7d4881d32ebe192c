// The copy baseline of bench:move: `mariadb-dump --single-transaction | mariadb`, one table
// from one shard master into a scratch database on another, the two tools joined by a
// kernel pipe (bash), so no Node process carries the bytes.

import { spawn } from 'node:child_process';

export interface MariaDbLogin {
  host: string;
  port: number;
  user: string;
  password: string;
}

/** Runs the pipe; resolves with its wall time in ms (both tools' start included). */
export async function dumpPipe(from: MariaDbLogin, to: MariaDbLogin, database: string, table: string, intoDatabase: string): Promise<number> {
  const script = 'mariadb-dump -h "$FROM_HOST" -P "$FROM_PORT" -u "$DB_USER" --single-transaction --skip-lock-tables "$DB" "$TABLE" | mariadb -h "$TO_HOST" -P "$TO_PORT" -u "$DB_USER" "$INTO"';
  const env = { ...process.env, MYSQL_PWD: from.password, DB_USER: from.user, FROM_HOST: from.host, FROM_PORT: String(from.port), TO_HOST: to.host, TO_PORT: String(to.port), DB: database, TABLE: table, INTO: intoDatabase };
  const started = performance.now();
  await new Promise<void>((resolve, reject) => {
    const pipe = spawn('bash', ['-o', 'pipefail', '-c', script], { env, stdio: ['ignore', 'inherit', 'inherit'] });
    pipe.on('error', reject);
    pipe.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`mariadb-dump | mariadb exited ${code}`))));
  });
  return performance.now() - started;
}
