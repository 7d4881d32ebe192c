// The ported move modules without an engine: the binlog text parser, the copy's chunks and
// resume point, the tailer's apply, the row hash and the comparison (fakes for mysql2
// sessions and for mariadb-binlog). Moved from services/manager/test/moves/move-engine.test.ts.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { BinlogRowParser, atOrPast, parseValue } from '../../src/capabilities/shard-data/binlog-rows';
import { chunkQuery, copyRows } from '../../src/capabilities/shard-data/copy';
import { BinlogTailer } from '../../src/capabilities/shard-data/tailer';
import { compareTarget, rowHash, widenedColumnCasts } from '../../src/capabilities/shard-data/compare';

// What mariadb-binlog --verbose --base64-output=DECODE-ROWS printed for a MariaDB 10.11 source
// (trimmed): an insert of two rows, an update, and a transaction on another table.
const OUTPUT = `# at 888
#261125  4:06:08 server id 7  end_log_pos 930 CRC32 0x8e7c51b6 	GTID 0-7-4 trans
START TRANSACTION
#261125  4:06:08 server id 7  end_log_pos 1194 CRC32 0xdaa2dd77 	Table_map: \`d_$$_s\`.\`t\` mapped to number 18
#261125  4:06:08 server id 7  end_log_pos 1280 CRC32 0x5cc5e26f 	Write_rows: table id 18 flags: STMT_END_F
### INSERT INTO \`d_$$_s\`.\`t\`
### SET
###   @1=1
###   @2='a'b\\c\\x0ad'
###   @9=-1 (4294967295)
### INSERT INTO \`d_$$_s\`.\`t\`
### SET
###   @1=2
###   @2=NULL
# Number of rows: 2
#261125  4:06:08 server id 7  end_log_pos 1311 CRC32 0xc0d7bc62 	Xid = 7
COMMIT/*!*/;
#261125  4:06:08 server id 7  end_log_pos 1353 CRC32 0x566c42cc 	GTID 0-7-5 trans
START TRANSACTION
#261125  4:06:08 server id 7  end_log_pos 1531 CRC32 0x7f924cb0 	Update_rows: table id 18 flags: STMT_END_F
### UPDATE \`d_$$_s\`.\`t\`
### WHERE
###   @1=2
###   @2=NULL
### SET
###   @1=3
###   @2='zz'
#261125  4:06:08 server id 7  end_log_pos 1562 CRC32 0x209eac6d 	Xid = 8
COMMIT/*!*/;
#261125  4:06:08 server id 7  end_log_pos 1604 CRC32 0xdf19240f 	GTID 0-7-6 trans
START TRANSACTION
### DELETE FROM \`other_$$_s\`.\`t\`
### WHERE
###   @1=9
#261125  4:06:08 server id 7  end_log_pos 1836 CRC32 0x62b67a74 	Xid = 9
COMMIT/*!*/;
#700101  0:00:00 server id 7  end_log_pos 0 	Rotate to bin.000002  pos: 4`;

function parse(keyOrdinals: number[]) {
  const p = new BinlogRowParser('d_$$_s', 't', keyOrdinals, 'bin.000001');
  return OUTPUT.split('\n').flatMap((l) => p.feed(l));
}

describe('the catch-up reads changed keys and transaction ends from mariadb-binlog text', () => {
  it('yields the key of every row image of the moved table, before and after an update', () => {
    const keys = parse([1]).filter((i) => i.kind === 'key').map((i) => (i.kind === 'key' ? i.key : []));
    expect(keys).toEqual([['1'], ['2'], ['2'], ['3']]);
  });

  it('ignores rows of a table with the same name in another database', () => {
    expect(parse([1]).filter((i) => i.kind === 'key').length).toBe(4);
  });

  it('marks the end of each transaction (never a GTID event inside one) and follows a rotate to the next file', () => {
    const ends = parse([1]).filter((i) => i.kind === 'boundary').map((i) => (i.kind === 'boundary' ? `${i.at.file}:${i.at.pos}` : ''));
    expect(ends).toEqual(['bin.000001:1311', 'bin.000001:1562', 'bin.000001:1836', 'bin.000002:4']);
  });

  it('reads composite keys in key order, string keys as their bytes', () => {
    const keys = parse([2, 1]).filter((i) => i.kind === 'key').map((i) => (i.kind === 'key' ? i.key : []));
    expect(keys[0]).toEqual([Buffer.from("a'b\\c\nd", 'latin1'), '1']);
    expect(keys[1]).toEqual([null, '2']);
  });

  it('parses unsigned values printed as a signed number with the unsigned one after', () => {
    expect(parseValue('-1 (4294967295)')).toBe('4294967295');
    expect(parseValue('NULL')).toBeNull();
  });

  it('compares positions across files', () => {
    expect(atOrPast({ file: 'b.000002', pos: 4 }, { file: 'b.000001', pos: 900 })).toBe(true);
    expect(atOrPast({ file: 'b.000001', pos: 899 }, { file: 'b.000001', pos: 900 })).toBe(false);
  });
});

describe('the copy resumes at the chunk after the last one copied', () => {
  const shape = { columns: ['a', 'b', 'v'], key: [{ name: 'a', ordinal: 1 }, { name: 'b', ordinal: 2 }] };

  it('starts at the beginning when the target is empty', () => {
    expect(chunkQuery('d_$$_s', 't', shape, null, 100)).toEqual({ sql: 'SELECT `a`, `b`, `v` FROM `d_$$_s`.`t` ORDER BY `a`, `b` LIMIT 100', values: [] });
  });

  it('continues strictly after the target\'s highest key', () => {
    expect(chunkQuery('d_$$_s', 't', shape, [5, 'x'], 100)).toEqual({ sql: 'SELECT `a`, `b`, `v` FROM `d_$$_s`.`t` WHERE (`a`, `b`) > (?, ?) ORDER BY `a`, `b` LIMIT 100', values: [5, 'x'] });
  });
});

describe('a copy run after a crash resumes after the last chunk the target holds', () => {
  /**
   * A source of rows 1..n and a target that already holds 1..copied, as mysql2 connections
   * answer; the target keeps an open transaction's rows apart until COMMIT (a ROLLBACK or a
   * dead session loses them), and its INSERT fails once `failAt` rows were sent.
   */
  function fakeShards(n: number, copied: number, chunk: number, failAt = Infinity) {
    const inserted: number[] = [];
    let open: number[] | null = null;
    let sent = 0;
    const commits: number[] = [];
    const src = {
      async query(q: string | { sql: string; values?: unknown[] }) {
        const sql = typeof q === 'string' ? q : q.sql;
        if (sql.startsWith('SHOW STATUS')) return [[{ Variable_name: 'Binlog_snapshot_file', Value: 'b.000001' }, { Variable_name: 'Binlog_snapshot_position', Value: '77' }]];
        if (sql.startsWith('SELECT')) {
          const after = typeof q === 'string' ? 0 : Number(q.values?.[0] ?? 0);
          const ids = Array.from({ length: n }, (_, i) => i + 1).filter((id) => id > after).slice(0, chunk);
          return [ids.map((id) => [id, `v${id}`])];
        }
        return [[]];
      },
    };
    const dst = {
      format: (sql: string, values: unknown[]) => mysql.format(sql, values as never),
      async query(q: string | { sql: string }) {
        const sql = typeof q === 'string' ? q : q.sql;
        const held = () => [...Array.from({ length: copied }, (_, i) => i + 1), ...inserted];
        if (sql.startsWith('SELECT')) return [held().length > 0 ? [[Math.max(...held())]] : []];
        if (sql === 'START TRANSACTION') open = [];
        if (sql === 'COMMIT') {
          inserted.push(...(open ?? []));
          commits.push(held().length);
          open = null;
        }
        if (sql === 'ROLLBACK') open = null;
        if (sql.startsWith('INSERT')) {
          const ids = [...sql.matchAll(/\((\d+), /g)].map((m) => Number(m[1]));
          sent += ids.length;
          if (sent > failAt) throw new Error('the target went away');
          (open ?? inserted).push(...ids);
        }
        return [[]];
      },
    };
    return { src, dst, inserted, commits };
  }
  const shape = { columns: ['id', 'v'], key: [{ name: 'id', ordinal: 1 }] };
  const opts = { chunkRows: 10, throttle: async () => {}, progress: async () => {} };
  const copy = (s: ReturnType<typeof fakeShards>, o: Parameters<typeof copyRows>[5] = opts) => copyRows(s.src as never, s.dst as never, { db: 'd', table: 't' }, { db: 'd', table: 't' }, shape, o);

  it('copies from the start into an empty target', async () => {
    const shards = fakeShards(25, 0, 10);
    const out = await copy(shards);
    expect(out).toMatchObject({ rows: 25, chunks: 3, resumedAfter: null, snapshot: { file: 'b.000001', pos: 77 } });
    expect(shards.inserted).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
  });

  it('starts at the chunk after the target\'s highest key, copying no row twice', async () => {
    const shards = fakeShards(25, 20, 10);
    const out = await copy(shards);
    expect(out).toMatchObject({ rows: 5, chunks: 1, resumedAfter: [20] });
    expect(shards.inserted).toEqual([21, 22, 23, 24, 25]);
  });

  it('commits whole groups of chunks, and a run cut off inside a group resumes after the last group committed', async () => {
    const progress: number[] = [];
    const grouped = { ...opts, commitRows: 20, progress: async (rows: number) => void progress.push(rows) };
    const first = fakeShards(45, 0, 10, 35);
    await expect(copy(first, grouped)).rejects.toThrow(/went away/);
    // Chunks 1-2 were one transaction; chunk 3 went into the next, which never committed.
    expect(first.commits).toEqual([20]);
    expect(progress).toEqual([20]);
    expect(first.inserted).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    const again = fakeShards(45, 20, 10);
    const out = await copy(again, grouped);
    expect(out).toMatchObject({ rows: 25, resumedAfter: [20] });
    expect(again.commits).toEqual([40, 45]);
    expect(again.inserted).toEqual(Array.from({ length: 25 }, (_, i) => i + 21));
  });
});

/** mariadb-binlog's lines for one transaction inserting id 42 into d_$$_s.t, ending at position 90. */
const INSERT_42_LINES = ['START TRANSACTION', '### INSERT INTO `d_$$_s`.`t`', '### SET', '###   @1=42', '#261125  4:06:08 server id 7  end_log_pos 90 CRC32 0x1 \tXid = 7', 'COMMIT/*!*/;'];

/** A catch-up of d_$$_s.t onto itself whose connections record the keys of the DELETEs it sends. */
function recordingTailer(options: { mariadbBinlog?: string; pollMs?: number } = {}) {
  const deleted: unknown[] = [];
  const conn = {
    async query(q: string | { sql: string; values?: unknown[] }, values?: unknown[]) {
      const sql = typeof q === 'string' ? q : q.sql;
      if (sql.startsWith('DELETE')) deleted.push(...(values ?? []));
      return [[]];
    },
  };
  const logger = { warn() {}, info() {}, debug() {}, error() {} };
  const tailer = new BinlogTailer({
    binlogLogin: { host: 'h', port: 1, user: 'u', password: 'p' }, src: conn as never, dst: conn as never,
    from: { db: 'd_$$_s', table: 't' }, to: { db: 'd_$$_s', table: 't' }, shape: { columns: ['id'], key: [{ name: 'id', ordinal: 1 }] },
    start: { file: 'bin.000001', pos: 4 }, logger: logger as never, ...options,
  });
  return { tailer, deleted };
}

describe('the catch-up applies keys read after an idle turn', () => {
  it('a flush with nothing to apply does not stop later flushes from applying', async () => {
    const { tailer, deleted } = recordingTailer();
    await tailer.flush();
    const feed = (line: string) => (tailer as unknown as { onLine(l: string): void }).onLine(line);
    for (const line of INSERT_42_LINES) feed(line);
    await tailer.flush();
    expect(deleted).toEqual(['42']);
    expect(tailer.applied).toEqual({ file: 'bin.000001', pos: 90 });
  });
});

describe('the verify hash compares values as the target stores them', () => {
  /** information_schema.COLUMNS as a table's session answers it. */
  const columns = (rows: [name: string, dataType: string, columnType: string, p?: number, s?: number, fsp?: number][]) => ({
    async query() {
      return [rows.map(([name, dataType, columnType, p, s, fsp]) => ({ name, dataType, columnType, p: p ?? null, s: s ?? null, fsp: fsp ?? null }))];
    },
  });
  const shape = { columns: ['id', 'note', 'amount', 'at', 'ratio', 'qty'], key: [{ name: 'id', ordinal: 1 }], text: ['note'] };

  it('reads the source side of a column the target holds wider as the target type, and leaves identical and integer columns alone', async () => {
    const src = columns([['id', 'int', 'int(11)'], ['note', 'varchar', 'varchar(40)'], ['amount', 'decimal', 'decimal(10,2)', 10, 2], ['at', 'datetime', 'datetime', undefined, undefined, 0], ['ratio', 'float', 'float'], ['qty', 'int', 'int(11)']]);
    const dst = columns([['id', 'bigint', 'bigint(20)'], ['note', 'varchar', 'varchar(60)'], ['amount', 'decimal', 'decimal(14,4)', 14, 4], ['at', 'datetime', 'datetime(3)', undefined, undefined, 3], ['ratio', 'double', 'double'], ['qty', 'int', 'int(11)']]);
    const casts = await widenedColumnCasts(src as never, dst as never, { db: 'd', table: 's' }, { db: 'd', table: 't' }, shape);
    expect([...casts]).toEqual([['amount', 'DECIMAL(14, 4)'], ['at', 'DATETIME(3)'], ['ratio', 'DOUBLE']]);
    const hash = rowHash(shape, casts);
    expect(hash).toContain('CAST(CAST(`amount` AS CHAR) AS DECIMAL(14, 4))');
    expect(hash).toContain('CONVERT(`note` USING utf8mb4)');
    expect(hash).toContain('`qty`, ISNULL(`qty`)');
    // The target side: its own columns, character ones in utf8mb4.
    expect(rowHash(shape)).not.toContain('CAST(');
  });
});

describe('the comparison (the verify gate\'s, run by the target\'s agent)', () => {
  /** A table as the comparison's queries see it: id -> row hash. */
  function fakeTable(hashOf: (id: number) => number | undefined, ids: number[]) {
    return {
      async query(q: string | { sql: string; values: unknown[] }) {
        if (typeof q === 'string') return [[]]; // information_schema.COLUMNS: no widened columns
        const v = q.values.map(Number);
        let rows = ids.filter((id) => hashOf(id) !== undefined);
        if (q.sql.includes(' IN (')) rows = rows.filter((id) => v.includes(id));
        else {
          const gt = / > \(\?\)/.test(q.sql) ? v[0] : -Infinity;
          const le = / <= \(\?\)/.test(q.sql) ? v[v.length - 1] : Infinity;
          rows = rows.filter((id) => id > gt && id <= le);
          const limit = /LIMIT (\d+)/.exec(q.sql);
          if (limit) rows = rows.slice(0, Number(limit[1]));
        }
        return [rows.map((id) => [id, hashOf(id)])];
      },
    };
  }
  const shape = { columns: ['id', 'v'], key: [{ name: 'id', ordinal: 1 }] };
  const ids = Array.from({ length: 50 }, (_, i) => i + 1);
  const t = { db: 'd', table: 't' };
  const compare = (dst: object, sources: object[], keys: unknown[][] | null = null) =>
    compareTarget(dst as never, t, sources.map((conn) => ({ conn: conn as never, table: t })), shape, 10, keys);

  it('names the key of a row that differs', async () => {
    const out = await compare(fakeTable((id) => (id === 37 ? -1 : id), ids), [fakeTable((id) => id, ids)]);
    expect(out.differing).toEqual([[37]]);
    expect(out.sourceRows).toEqual([50]);
    expect(out.chunks).toBe(6);
  });

  it('names a row the target has and the source does not, and one only the source has (the last chunk is open-ended on the source side)', async () => {
    const out = await compare(fakeTable((id) => (id > 48 ? undefined : id), ids), [fakeTable((id) => (id === 20 ? undefined : id), ids)]);
    expect(out.differing).toEqual([[20], [49], [50]]);
  });

  it('compares the target with the rows of every source over the same key range', async () => {
    const odd = fakeTable((id) => (id % 2 ? id : undefined), ids);
    const even = fakeTable((id) => (id % 2 ? undefined : id === 44 ? -1 : id), ids);
    const out = await compare(fakeTable((id) => id, ids), [odd, even]);
    expect(out.sourceRows).toEqual([25, 25]);
    expect(out.differing).toEqual([[44]]);
  });

  it('with keys, compares only those rows', async () => {
    const out = await compare(fakeTable((id) => (id === 37 || id === 3 ? -1 : id), ids), [fakeTable((id) => id, ids)], [[37], [38]]);
    expect(out).toMatchObject({ sourceRows: [2], chunks: 1, differing: [[37]] });
  });
});

describe('the catch-up reads mariadb-binlog\'s output as it is written', () => {
  it('applies a transaction written after an idle spell without waiting for its next poll', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'kcm-tailer-test-'));
    // A stand-in for mariadb-binlog: after 300 ms it prints one transaction of the moved table (its stdout is the tailer's output file), then idles.
    const fake = path.join(dir, 'fake-binlog.sh');
    const txn = [...INSERT_42_LINES, ''].join('\n');
    await writeFile(fake, `#!/bin/sh\nsleep 0.3\nprintf '%s' '${txn.replace(/'/g, "'\\''")}'\nexec sleep 60\n`, { mode: 0o755 });
    // A poll so slow that only a wake-up on the write can apply it in time.
    const { tailer, deleted } = recordingTailer({ mariadbBinlog: fake, pollMs: 60_000 });
    try {
      await tailer.start();
      await tailer.waitFor({ file: 'bin.000001', pos: 90 }, 5_000);
      expect(deleted).toEqual(['42']);
    } finally {
      await tailer.stop();
      await rm(dir, { recursive: true, force: true });
    }
  }, 20_000);
});
