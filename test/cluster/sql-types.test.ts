// Every type kcm_ddl maps (README "Type map") round-trips exactly through a compute node,
// both ways, on real engines (issue 35, defect 5): rows written through the compute node are
// on the shard as written and read back the same; rows written on the shard read back through
// the compute node as PostgreSQL itself renders them. Edge values: fractions of seconds,
// minimum and maximum of each type, NULL, non-ASCII text, 65-digit decimals, a session time
// zone far from UTC. 1 shard x 3 nodes, 1 compute node.

import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSqlCluster, type SqlCluster } from './sql-fixture';

const DB = '`postgres_$$_public`';

/** The columns of the test tables: one per mapped type, some with a precision. */
const COLUMNS = [
  { name: 'i2', type: 'smallint' },
  { name: 'i4', type: 'integer' },
  { name: 'i8', type: 'bigint' },
  { name: 'f4', type: 'real' },
  { name: 'f8', type: 'double precision' },
  { name: 'num', type: 'numeric(65,30)' },
  { name: 'amount', type: 'numeric(20,2)' },
  { name: 't', type: 'text' },
  { name: 'vc', type: 'varchar(20)' },
  { name: 'ch', type: 'char(5)' },
  { name: 'b', type: 'bytea' },
  { name: 'd', type: 'date' },
  { name: 'ts', type: 'timestamp' },
  { name: 'ts3', type: 'timestamp(3)' },
  { name: 'tm', type: 'time' },
  { name: 'tm2', type: 'time(2)' },
] as const;

type Row = Record<string, string | null>;

// As PostgreSQL literals; MariaDB's DATE and DATETIME range is years 1000-9999.
const ROWS: Row[] = [
  {
    id: '1', i2: '12', i4: '123456', i8: '1234567890123', f4: '1.2345678', f8: '1.2345678901234567', num: '12345678901234567890123456789012345.123456789012345678901234567891',
    amount: '123456789012345678.99', t: 'grüße 😀 日本語 \'quoted\' \\ back', vc: 'ünïcödé', ch: 'ab', b: '\\x00ff10', d: '2026-02-28',
    ts: '2026-01-01 10:00:00.123456', ts3: '2026-01-01 10:00:00.123', tm: '10:00:00.5', tm2: '10:00:00.25',
  },
  {
    id: '2', i2: '-32768', i4: '-2147483648', i8: '-9223372036854775808', f4: '-3.4028235e+38', f8: '-1.7976931348623157e+308',
    num: '-99999999999999999999999999999999999.999999999999999999999999999999', amount: '-999999999999999999.99', t: '', vc: '', ch: '', b: '\\x',
    d: '1000-01-01', ts: '1000-01-01 00:00:00', ts3: '1000-01-01 00:00:00', tm: '00:00:00', tm2: '00:00:00',
  },
  {
    id: '3', i2: '32767', i4: '2147483647', i8: '9223372036854775807', f4: '3.4028235e+38', f8: '1.7976931348623157e+308',
    num: '99999999999999999999999999999999999.999999999999999999999999999999', amount: '999999999999999999.99', t: 'x'.repeat(5000), vc: 'z'.repeat(20), ch: 'abcde',
    b: `\\x${'ab'.repeat(3000)}`, d: '9999-12-31', ts: '9999-12-31 23:59:59.999999', ts3: '9999-12-31 23:59:59.999', tm: '23:59:59.999999', tm2: '23:59:59.99',
  },
  {
    id: '4', i2: '0', i4: '0', i8: '0', f4: '1.1754944e-38', f8: '2.2250738585072014e-308', num: '0.000000000000000000000000000001', amount: '0.01',
    t: ' ', vc: ' x ', ch: ' a', b: '\\x00', d: '2000-02-29', ts: '2026-01-01 00:00:00.000001', ts3: '2026-01-01 00:00:00.001', tm: '00:00:00.000001', tm2: '00:00:00.01',
  },
  Object.fromEntries([['id', '5'], ...COLUMNS.map((c) => [c.name, null])]),
];

const columnList = COLUMNS.map((c) => c.name).join(', ');
const asText = `id::text, ${COLUMNS.map((c) => `${c.name}::text AS ${c.name}`).join(', ')}`;

/** Each row as PostgreSQL renders it (::text), from a temporary table of the same types: what every path must give back. */
async function renderedByPostgres(c: pg.Client): Promise<Row[]> {
  await c.query(`CREATE TEMP TABLE expected (id int, ${COLUMNS.map((col) => `${col.name} ${col.type}`).join(', ')})`);
  for (const row of ROWS) await insertRow(c, 'expected', row);
  const { rows } = await c.query(`SELECT ${asText} FROM expected ORDER BY id`);
  await c.query('DROP TABLE expected');
  return rows as Row[];
}

async function insertRow(c: pg.Client, table: string, row: Row): Promise<void> {
  const names = ['id', ...COLUMNS.map((col) => col.name)];
  const types = ['int', ...COLUMNS.map((col) => col.type)];
  await c.query(`INSERT INTO ${table} (${names.join(', ')}) VALUES (${names.map((_, i) => `$${i + 1}::${types[i]}`).join(', ')})`, names.map((n) => row[n]));
}

/** The shard's values as text PostgreSQL would print for the same value (its own formats differ only in these ways). */
async function onShard(s: SqlCluster, table: string): Promise<Row[]> {
  const m = await s.mysqlAs(s.masters()[0]);
  try {
    const select = [
      'id',
      ...COLUMNS.map((c) => {
        if (c.name === 'b') return 'LOWER(HEX(b)) AS b';
        // The server's text of a FLOAT has 6 digits: the value it holds, as a double.
        if (c.name === 'f4') return 'CAST(f4 AS DOUBLE) AS f4';
        if (c.name === 'f8') return 'f8';
        return `CAST(${c.name} AS CHAR) AS ${c.name}`;
      }),
    ].join(', ');
    const [rows] = (await m.query({ sql: `SELECT ${select} FROM ${DB}.${table} ORDER BY id`, supportBigNumbers: true, bigNumberStrings: true })) as unknown as [Record<string, unknown>[]];
    return rows.map((r) => {
      const out: Row = { id: String(r.id) };
      for (const c of COLUMNS) {
        const v = r[c.name];
        if (v === null) out[c.name] = null;
        else if (c.name === 'b') out.b = `\\x${String(v)}`;
        else out[c.name] = String(v);
      }
      return out;
    });
  } finally {
    await m.end();
  }
}

/** PostgreSQL's rendering in MariaDB's: fractions padded to the column's scale. */
function asMariadbText(rows: Row[]): Row[] {
  const scale = new Map<string, number>([['ts', 6], ['ts3', 3], ['tm', 6], ['tm2', 2]]);
  return rows.map((r) => {
    const out: Row = { ...r };
    for (const [name, digits] of scale) {
      const v = r[name];
      if (v === null) continue;
      const [whole, fraction = ''] = v.split('.');
      out[name] = `${whole}.${fraction.padEnd(digits, '0')}`;
    }
    for (const name of ['f4', 'f8']) {
      const v = r[name];
      // MariaDB sends FLOAT as the double it holds: the float's exact value.
      if (v !== null) out[name] = String(name === 'f4' ? Math.fround(Number(v)) : Number(v));
    }
    return out;
  });
}

describe('every mapped type round-trips exactly through a compute node (1 shard, 1 compute node)', () => {
  let s: SqlCluster;
  let expected: Row[];

  beforeAll(async () => {
    s = await startSqlCluster({}, { shards: '1', comps: '1' });
    const c = await s.pgAs(s.comps()[0]);
    try {
      expected = await renderedByPostgres(c);
    } finally {
      await c.end();
    }
  }, 300_000);

  afterAll(async () => {
    await s?.close();
  }, 120_000);

  /** A session in a time zone far from UTC (-03:30): no value of these types may move with it. */
  const session = async () => {
    const c = await s.pgAs(s.comps()[0]);
    await c.query(`SET TimeZone = 'America/St_Johns'`);
    return c;
  };

  it('written through the compute node: on the shard as written, and read back through the compute node the same', async () => {
    const c = await session();
    try {
      await c.query(`create table via_comp (id int primary key, ${COLUMNS.map((col) => `${col.name} ${col.type}`).join(', ')})`);
      for (const row of ROWS) await insertRow(c, 'via_comp', row);
      expect((await c.query(`SELECT ${asText} FROM via_comp ORDER BY id`)).rows).toEqual(expected);
    } finally {
      await c.end();
    }
    expect(await onShard(s, 'via_comp')).toEqual(asMariadbText(expected));
  }, 60_000);

  it('written on the shard: read through the compute node as PostgreSQL renders the same values', async () => {
    const c = await session();
    try {
      await c.query(`create table via_shard (id int primary key, ${COLUMNS.map((col) => `${col.name} ${col.type}`).join(', ')})`);
      const m = await s.mysqlAs(s.masters()[0]);
      try {
        for (const row of expected) {
          const values = ['id', ...COLUMNS.map((col) => col.name)].map((n) => {
            const v = row[n];
            if (v === null) return null;
            if (n === 'b') return Buffer.from(v.slice(2), 'hex');
            // The float's exact value: MariaDB reads a literal as a double first, and
            // 3.4028235e+38 rounds above FLT_MAX there ("Out of range value").
            if (n === 'f4') return String(Math.fround(Number(v)));
            return v;
          });
          await m.query(`INSERT INTO ${DB}.via_shard (id, ${columnList}) VALUES (${values.map(() => '?').join(', ')})`, values);
        }
      } finally {
        await m.end();
      }
      expect((await c.query(`SELECT ${asText} FROM via_shard ORDER BY id`)).rows).toEqual(expected);
    } finally {
      await c.end();
    }
  }, 60_000);

  it('a key that is a timestamp or a large decimal: rows that differ only in the fraction or beyond 15 digits are inserted, updated and deleted one by one', async () => {
    const c = await session();
    try {
      await c.query('create table by_time (at timestamp primary key, v int)');
      await c.query(`insert into by_time values ('2026-01-01 10:00:00.25', 1), ('2026-01-01 10:00:00.75', 2), ('2026-01-01 10:00:00', 3)`);
      expect((await c.query(`update by_time set v = 20 where at = '2026-01-01 10:00:00.75'`)).rowCount).toBe(1);
      expect((await c.query(`delete from by_time where v = 1`)).rowCount).toBe(1);
      // A parameter of a generic plan reaches the shard as a bound value, not a literal.
      await c.query('SET plan_cache_mode = force_generic_plan');
      expect((await c.query('select v from by_time where at = $1::timestamp', ['2026-01-01 10:00:00.75'])).rows).toEqual([{ v: 20 }]);
      await c.query('create table by_decimal (k numeric(30,10) primary key, v int)');
      await c.query(`insert into by_decimal values (12345678901234567890.0000000001, 1), (12345678901234567890.0000000002, 2)`);
      expect((await c.query('update by_decimal set v = 20 where k = $1::numeric', ['12345678901234567890.0000000002'])).rowCount).toBe(1);
      expect((await c.query(`delete from by_decimal where v = 1`)).rowCount).toBe(1);
      expect((await c.query('select k::text, v from by_decimal')).rows).toEqual([{ k: '12345678901234567890.0000000002', v: 20 }]);
      // Values a shard has no form for are refused, not written as something else.
      await expect(c.query(`insert into by_time values ('infinity', 4)`)).rejects.toThrow(/kcm: timestamp infinity is outside what a shard's DATETIME holds \(years 1 to 9999\); nothing was written/);
      await expect(c.query(`insert into by_time values ('0044-03-15 12:00:00 BC', 4)`)).rejects.toThrow(/outside what a shard's DATETIME holds/);
      await expect(c.query(`insert into by_decimal values ('NaN', 4)`)).rejects.toThrow(/kcm: numeric NaN has no MariaDB DECIMAL form; nothing was written/);
    } finally {
      await c.end();
    }
    const m = await s.mysqlAs(s.masters()[0]);
    try {
      const [times] = (await m.query(`SELECT CAST(at AS CHAR) AS at, v FROM ${DB}.by_time ORDER BY at`)) as unknown as [unknown[]];
      expect(times).toEqual([{ at: '2026-01-01 10:00:00.000000', v: 3 }, { at: '2026-01-01 10:00:00.750000', v: 20 }]);
      const [keys] = (await m.query(`SELECT CAST(k AS CHAR) AS k, v FROM ${DB}.by_decimal`)) as unknown as [unknown[]];
      expect(keys).toEqual([{ k: '12345678901234567890.0000000002', v: 20 }]);
    } finally {
      await m.end();
    }
  }, 60_000);

  it('timestamp with time zone has no MariaDB form that keeps its zone: refused at CREATE TABLE, naming the type', async () => {
    const c = await session();
    try {
      await expect(c.query('create table with_zone (id int primary key, at timestamptz)')).rejects.toThrow(/column public\.with_zone\.at has type timestamp with time zone, which has no MariaDB form that reads back the same; nothing was changed/);
    } finally {
      await c.end();
    }
  }, 60_000);
});
