// Real mariadbd, through the gRPC agent API: ListTables reports the tables of the cluster
// databases (`D_$$_S`) on an instance, what delete_shards asks before it removes a shard.

import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOSTS, secrets, startShardFixture, type ShardFixture } from './shard-fixture';

const PORT = 57111;
let f: ShardFixture;

describe('ListTables on a real mariadbd', () => {
  beforeAll(async () => {
    f = await startShardFixture();
    await f.clients[0].install(f.installRequest('install-list-tables', PORT, 1));
  }, 120_000);

  afterAll(async () => {
    await f?.close();
  });

  it('an instance with no cluster database lists no table', async () => {
    expect(await f.clients[0].listTables(PORT)).toEqual({ tables: [] });
  });

  it('lists every table of the D_$$_S databases, sorted, and nothing of other databases', async () => {
    const conn = await mysql.createConnection({ host: HOSTS[0], port: PORT, ...secrets.storage, connectTimeout: 5000 });
    try {
      await conn.query('CREATE DATABASE `shop_$$_public`');
      await conn.query('CREATE TABLE `shop_$$_public`.orders (id INT PRIMARY KEY)');
      await conn.query('CREATE TABLE `shop_$$_public`.items (id INT PRIMARY KEY)');
      await conn.query('CREATE DATABASE `shop_$$_audit`');
      await conn.query('CREATE TABLE `shop_$$_audit`.log (id INT PRIMARY KEY)');
    } finally {
      await conn.end();
    }
    expect(await f.clients[0].listTables(PORT)).toEqual({ tables: ['shop_$$_audit.log', 'shop_$$_public.items', 'shop_$$_public.orders'] });
  });

  it('a port with no instance is an error, not an empty list', async () => {
    await expect(f.clients[0].listTables(PORT + 1)).rejects.toThrow();
  });
});
