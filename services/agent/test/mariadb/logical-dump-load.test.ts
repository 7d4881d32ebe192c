// Real mariadbd, through the gRPC agent API: Dump streams a consistent mariadb-dump of a
// table (or a partitioned parent's partitions), a schema database or every database of a
// PostgreSQL database out of one instance, naming the tables it holds (list_only: only
// naming them); Load brings such a dump into another instance,
// which need not have the database.

import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentCallError, MariaDbLogicalAgentClient } from '@kcm/agent-api';
import { HOSTS, secrets, startShardFixture, type ShardFixture } from './shard-fixture';

const SOURCE = 57121;
const TARGET = 57122;
let f: ShardFixture;
let source: MariaDbLogicalAgentClient;
let target: MariaDbLogicalAgentClient;

async function sql<T = unknown>(host: string, port: number, statement: string): Promise<T> {
  const conn = await mysql.createConnection({ host, port, ...secrets.storage, connectTimeout: 5000, multipleStatements: true });
  try {
    return (await conn.query(statement))[0] as T;
  } finally {
    await conn.end();
  }
}

async function collect(data: AsyncIterable<Buffer>): Promise<Buffer[]> {
  const chunks: Buffer[] = [];
  for await (const c of data) chunks.push(c);
  return chunks;
}

async function* replay(chunks: Buffer[]): AsyncGenerator<Buffer> {
  yield* chunks;
}

describe('logical Dump and Load on real mariadbd', () => {
  beforeAll(async () => {
    f = await startShardFixture();
    await Promise.all([f.clients[0].install(f.installRequest('logical-src', SOURCE, 1)), f.clients[1].install(f.installRequest('logical-dst', TARGET, 2))]);
    source = new MariaDbLogicalAgentClient(f.agents[0].address);
    target = new MariaDbLogicalAgentClient(f.agents[1].address);
    await sql(
      HOSTS[0],
      SOURCE,
      'CREATE DATABASE `shop_$$_public`; CREATE DATABASE `shop_$$_audit`;' +
        'CREATE TABLE `shop_$$_public`.orders (id INT PRIMARY KEY, note VARCHAR(40), raw VARBINARY(8));' +
        "INSERT INTO `shop_$$_public`.orders VALUES (1, 'first', 0x00ff0d0a), (2, 'it''s \\\\ two', NULL);" +
        'CREATE TABLE `shop_$$_public`.items (id INT PRIMARY KEY); INSERT INTO `shop_$$_public`.items VALUES (7);' +
        'CREATE TABLE `shop_$$_audit`.log (id INT PRIMARY KEY); INSERT INTO `shop_$$_audit`.log VALUES (9);',
    );
  }, 180_000);

  afterAll(async () => {
    source?.close();
    target?.close();
    await f?.close();
  });

  it('a table dump names its table and loads into an instance without the database, rows and bytes intact', async () => {
    const dump = await source.dump({ port: SOURCE, databases: ['shop_$$_public'], tables: ['orders'] });
    expect(dump.tables).toEqual(['shop_$$_public.orders']);
    const chunks = await collect(dump.data);
    const reply = await target.load('load-orders', TARGET, replay(chunks));
    expect(reply.bytes).toBe(chunks.reduce((n, c) => n + c.length, 0));
    const rows = await sql<{ id: number; note: string; raw: string | null }[]>(HOSTS[1], TARGET, 'SELECT id, note, HEX(raw) AS raw FROM `shop_$$_public`.orders ORDER BY id');
    expect(rows).toEqual([
      { id: 1, note: 'first', raw: '00FF0D0A' },
      { id: 2, note: "it's \\ two", raw: null },
    ]);
    expect(await sql(HOSTS[1], TARGET, "SHOW TABLES FROM `shop_$$_public`")).toHaveLength(1);
  });

  it('loading the same dump again is a retry: the table ends as dumped, not doubled', async () => {
    const chunks = await collect((await source.dump({ port: SOURCE, databases: ['shop_$$_public'], tables: ['orders'] })).data);
    await sql(HOSTS[1], TARGET, "INSERT INTO `shop_$$_public`.orders VALUES (3, 'after the backup', NULL)");
    await target.load('load-orders-again', TARGET, replay(chunks));
    expect(await sql(HOSTS[1], TARGET, 'SELECT id FROM `shop_$$_public`.orders ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);
  });

  it('a prefix dump holds every database of a PostgreSQL database, and no other', async () => {
    await sql(HOSTS[0], SOURCE, 'CREATE DATABASE `other_$$_public`; CREATE TABLE `other_$$_public`.x (id INT PRIMARY KEY)');
    const dump = await source.dump({ port: SOURCE, databasePrefix: 'shop_$$_' });
    expect(dump.tables).toEqual(['shop_$$_audit.log', 'shop_$$_public.items', 'shop_$$_public.orders']);
    const text = Buffer.concat(await collect(dump.data)).toString();
    expect(text).toContain('CREATE DATABASE /*!32312 IF NOT EXISTS*/ `shop_$$_audit`');
    expect(text).not.toContain('other_$$_public');
  });

  it('a table or database the instance does not hold is NOT_FOUND, a bad identifier INVALID_ARGUMENT', async () => {
    await expect(source.dump({ port: SOURCE, databases: ['shop_$$_public'], tables: ['gone'] })).rejects.toMatchObject({ name: 'AgentCallError', code: 5 });
    await expect(source.dump({ port: SOURCE, databases: ['nope_$$_public'] })).rejects.toBeInstanceOf(AgentCallError);
    await expect(source.dump({ port: SOURCE, databases: ['shop`; DROP'] })).rejects.toMatchObject({ code: 3 });
  });

  it('a partitioned parent (no table here) stands for its partitions, COMMENT and all; listing only names them, and nothing for what is not here', async () => {
    const comment = (bound: string) => JSON.stringify({ kcm_partition_of: ['public', 'acct'], key: 'RANGE (id)', bound }).replace(/'/g, "''");
    await sql(
      HOSTS[0],
      SOURCE,
      `CREATE TABLE \`shop_$$_public\`.acct_01 (id INT PRIMARY KEY) COMMENT='${comment('FOR VALUES FROM (1) TO (11)')}';` +
        `CREATE TABLE \`shop_$$_public\`.acct_02 (id INT PRIMARY KEY) COMMENT='${comment('FOR VALUES FROM (11) TO (21)')}';` +
        'INSERT INTO `shop_$$_public`.acct_01 VALUES (1), (2); INSERT INTO `shop_$$_public`.acct_02 VALUES (11);',
    );
    expect(await source.tablesOf({ port: SOURCE, databases: ['shop_$$_public'], tables: ['acct'] })).toEqual(['shop_$$_public.acct_01', 'shop_$$_public.acct_02']);
    expect(await source.tablesOf({ port: SOURCE, databases: ['shop_$$_public'], tables: ['gone'] })).toEqual([]);
    expect(await source.tablesOf({ port: SOURCE, databases: ['nope_$$_public'] })).toEqual([]);
    const dump = await source.dump({ port: SOURCE, databases: ['shop_$$_public'], tables: ['acct'] });
    expect(dump.tables).toEqual(['shop_$$_public.acct_01', 'shop_$$_public.acct_02']);
    await target.load('load-acct', TARGET, replay(await collect(dump.data)));
    const loaded = await sql<{ name: string; comment: string }[]>(HOSTS[1], TARGET, "SELECT TABLE_NAME AS name, TABLE_COMMENT AS comment FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'shop_$$_public' AND TABLE_NAME LIKE 'acct%' ORDER BY 1");
    expect(loaded.map((r) => [r.name, JSON.parse(r.comment).bound])).toEqual([
      ['acct_01', 'FOR VALUES FROM (1) TO (11)'],
      ['acct_02', 'FOR VALUES FROM (11) TO (21)'],
    ]);
    expect(await sql(HOSTS[1], TARGET, 'SELECT id FROM `shop_$$_public`.acct_01 UNION ALL SELECT id FROM `shop_$$_public`.acct_02 ORDER BY 1')).toEqual([{ id: 1 }, { id: 2 }, { id: 11 }]);
  });

  it('a dump that does not load fails the load with the client error', async () => {
    await expect(target.load('load-garbage', TARGET, replay([Buffer.from('THIS IS NOT SQL;\n')]))).rejects.toThrow(/syntax/i);
  });
});
