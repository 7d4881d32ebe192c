import { describe, expect, it } from 'vitest';
import { BinlogRowParser, atOrPast, parseValue } from '../../src/jobs/moves/binlog-rows';
import { chunkQuery } from '../../src/jobs/moves/copy';
import { cutOver, type ForeignTableAgent } from '../../src/jobs/moves/cutover';

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

  it('marks the end of each transaction and follows a rotate to the next file', () => {
    const ends = parse([1]).filter((i) => i.kind === 'boundary').map((i) => (i.kind === 'boundary' ? `${i.at.file}:${i.at.pos}` : ''));
    expect(ends).toEqual(['bin.000001:930', 'bin.000001:1311', 'bin.000001:1353', 'bin.000001:1562', 'bin.000001:1604', 'bin.000001:1836', 'bin.000002:4']);
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

function fakeAgent(fail: 'repoint' | null) {
  const calls: string[] = [];
  const agent: ForeignTableAgent = {
    hold: async (h) => (calls.push(`hold ${h}`), { server: 'shard_1' }),
    repoint: async (h, _id, server) => {
      calls.push(`repoint ${h} ${server}`);
      if (fail === 'repoint' && h === 'b') throw new Error('refused');
    },
    release: async (h) => calls.push(`release ${h}`),
    server: async () => ({ server: 'shard_1' }),
  };
  return { agent, calls };
}

describe('the cut-over holds every compute node before it waits for the tail', () => {
  const plan = (calls: string[]) => ({
    holdId: 'j1-0-1',
    comps: [{ hostaddr: 'a', port: 1 }, { hostaddr: 'b', port: 2 }],
    foreign: { database: 'd', schema: 's', table: 't' },
    targetServer: 'shard_2',
    holdMs: 5000,
    sourcePosition: async () => (calls.push('source position'), { file: 'f', pos: 9 }),
    caughtUp: async () => void calls.push('caught up'),
  });

  it('holds all, reads the source position, waits, then re-points all', async () => {
    const { agent, calls } = fakeAgent(null);
    const out = await cutOver(agent, plan(calls));
    expect(calls.slice(0, 2).sort()).toEqual(['hold a', 'hold b']);
    expect(calls.slice(2, 4)).toEqual(['source position', 'caught up']);
    expect(calls.slice(4).sort()).toEqual(['repoint a shard_2', 'repoint b shard_2']);
    expect(out.blockedMs).toBeGreaterThanOrEqual(0);
  });

  it('releases every hold when a re-point fails, so the source keeps serving', async () => {
    const { agent, calls } = fakeAgent('repoint');
    await expect(cutOver(agent, plan(calls))).rejects.toThrow(/source keeps serving: refused/);
    expect(calls.filter((c) => c.startsWith('release')).sort()).toEqual(['release a', 'release b']);
  });
});
