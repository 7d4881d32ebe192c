// The catch-up's positions: which binlog positions the parser reports as read-up-to, and
// that the tailer reaches every position SHOW MASTER STATUS can give, across rotations and
// after an idle spell. The recorded output (fixtures/mariadb-binlog-rotations.txt) is what
// `stdbuf -o0 mariadb-binlog --read-from-remote-server --base64-output=DECODE-ROWS --verbose
// --stop-never --table=t` printed for a MariaDB 10.11.19 master (server id 7) from
// mariadb-bin.000006:344 while these ran, one statement each, then nothing for seconds:
//
//   insert into d.t values (10,1),(11,2)            FLUSH BINARY LOGS
//   create table d.x (...) engine=InnoDB            xa start 'x1'; insert (12,3); xa end; xa prepare
//   xa commit 'x1'                                  FLUSH BINARY LOGS
//   create table d.a (...) engine=Aria; insert into d.a values (1); begin; update d.t ...; rollback
//   xa start 'x2'; update d.t set v=v+1 where id=11; xa end; xa commit 'x2' one phase
//   xa start 'x3'; delete from d.t where id=12; xa end; xa prepare      xa rollback 'x3'
//   FLUSH BINARY LOGS                               insert into d.o values (77)
//
// SHOW BINLOG EVENTS on that master gave the group ends listed in GROUP_ENDS below.

import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { BinlogRowParser, atOrPast, type BinlogItem } from '../../src/capabilities/shard-data/binlog-rows';
import { BinlogTailer } from '../../src/capabilities/shard-data/tailer';

const RECORDED = readFileSync(path.join(__dirname, 'fixtures', 'mariadb-binlog-rotations.txt'), 'latin1');

/** Every position the master's SHOW MASTER STATUS could have answered while the statements above ran (each group's end, each file's end of header events). */
const GROUP_ENDS = [
  'mariadb-bin.000006:569', // insert (10, 11)
  'mariadb-bin.000007:4', // FLUSH: the rotation
  'mariadb-bin.000007:256', // Format_description
  'mariadb-bin.000007:299', // Gtid_list
  'mariadb-bin.000007:344', // Binlog_checkpoint mariadb-bin.000006
  'mariadb-bin.000007:389', // Binlog_checkpoint mariadb-bin.000007
  'mariadb-bin.000007:554', // CREATE TABLE d.x (GTID ... ddl + one query)
  'mariadb-bin.000007:857', // XA PREPARE 'x1' (its rows: 12)
  'mariadb-bin.000007:987', // XA COMMIT 'x1' (GTID + one query)
  'mariadb-bin.000008:4',
  'mariadb-bin.000008:256',
  'mariadb-bin.000008:299',
  'mariadb-bin.000008:344',
  'mariadb-bin.000008:389',
  'mariadb-bin.000008:552', // CREATE TABLE d.a
  'mariadb-bin.000008:791', // the Aria insert: GTID, START TRANSACTION, ..., query COMMIT
  'mariadb-bin.000008:1013', // XA ... ONE PHASE: an ordinary transaction ending in Xid
  'mariadb-bin.000008:1314', // XA PREPARE 'x3'
  'mariadb-bin.000008:1446', // XA ROLLBACK 'x3'
  'mariadb-bin.000009:4',
  'mariadb-bin.000009:256',
  'mariadb-bin.000009:299',
  'mariadb-bin.000009:344',
  'mariadb-bin.000009:546', // insert into d.o (another table: no keys, still an end)
  'mariadb-bin.000009:591', // Binlog_checkpoint mariadb-bin.000009, written after it: the binlog's end while idle
];

function parseAll(text: string, startFile = 'mariadb-bin.000006'): BinlogItem[] {
  const p = new BinlogRowParser('d', 't', [1], startFile);
  return text.split('\n').flatMap((l) => p.feed(l));
}
const at = (i: BinlogItem) => (i.kind === 'boundary' ? `${i.at.file}:${i.at.pos}` : '');

describe('the catch-up reads up to the end of event groups and of the events between them (recorded mariadb-binlog output)', () => {
  it('reports exactly the ends of groups and of rotation, Format_description, Gtid_list and Binlog_checkpoint events, in order', () => {
    const ends = parseAll(RECORDED).filter((i) => i.kind === 'boundary').map(at);
    // The start (the fake Rotate the dump begins with), then every end once: the real Rotate and the fake one after it name the same place.
    expect([...new Set(ends)]).toEqual(['mariadb-bin.000006:344', ...GROUP_ENDS]);
  });

  it('never reports a position inside a group: not after a GTID event, an XA START, a table map, a row event or XA END', () => {
    const ends = new Set(parseAll(RECORDED).filter((i) => i.kind === 'boundary').map(at));
    for (const inside of ['mariadb-bin.000006:386', 'mariadb-bin.000006:538', 'mariadb-bin.000007:431', 'mariadb-bin.000007:600', 'mariadb-bin.000007:736', 'mariadb-bin.000007:819', 'mariadb-bin.000007:901', 'mariadb-bin.000008:594', 'mariadb-bin.000008:1276']) {
      expect(ends.has(inside), inside).toBe(false);
    }
  });

  it('yields each key of the moved table before the end of its group', () => {
    const items = parseAll(RECORDED);
    const keys = items.flatMap((i, n) => (i.kind === 'key' ? [{ key: i.key[0], endAfter: at(items.slice(n).find((x) => x.kind === 'boundary')!) }] : []));
    expect(keys).toEqual([
      { key: '10', endAfter: 'mariadb-bin.000006:569' },
      { key: '11', endAfter: 'mariadb-bin.000006:569' },
      { key: '12', endAfter: 'mariadb-bin.000007:857' }, // the XA PREPARE's rows
      { key: '11', endAfter: 'mariadb-bin.000008:1013' },
      { key: '11', endAfter: 'mariadb-bin.000008:1013' },
      { key: '12', endAfter: 'mariadb-bin.000008:1314' },
    ]);
  });

  it('reaches the end of a file whose last events are two Binlog_checkpoints after the start (the reported 000002:344 -> 389)', () => {
    // A dump from the snapshot position 344 of a fresh file: the second checkpoint was written after the snapshot.
    const text = [
      '# at 344',
      '#700101  0:00:00 server id 7  end_log_pos 0 \tRotate to mariadb-bin.000002  pos: 344',
      '# at 344',
      '#261206  9:08:41 server id 7  end_log_pos 0 CRC32 0x8c4dd76c \tStart: binlog v 4, server v 10.11.19-MariaDB-0+deb12u1-log created 261206  9:08:41',
      '# at 344',
      '#261206  9:06:55 server id 7  end_log_pos 389 CRC32 0x88bf3419 \tBinlog checkpoint mariadb-bin.000002',
    ].join('\n');
    expect(parseAll(text, 'mariadb-bin.000002').map(at)).toEqual(['mariadb-bin.000002:344', 'mariadb-bin.000002:389']);
  });

  it('closes a group whose end it did not recognise at the next GTID or file event, so a later position is still reached', () => {
    const text = [
      '#261206  9:09:12 server id 7  end_log_pos 100 CRC32 0x1 \tGTID 0-7-1 trans',
      'START TRANSACTION',
      '#261206  9:09:12 server id 7  end_log_pos 150 CRC32 0x1 \tSome_future_commit_event',
      '#261206  9:09:12 server id 7  end_log_pos 199 CRC32 0x1 \tRotate to mariadb-bin.000002  pos: 4',
    ].join('\n');
    expect(parseAll(text, 'mariadb-bin.000001').map(at).filter(Boolean)).toEqual(['mariadb-bin.000001:150', 'mariadb-bin.000002:4']);
  });

  it('does not end a transaction at ROLLBACK TO a savepoint', () => {
    const text = [
      '#261206  9:09:12 server id 7  end_log_pos 100 CRC32 0x1 \tGTID 0-7-1',
      'START TRANSACTION',
      '#261206  9:09:12 server id 7  end_log_pos 180 CRC32 0x1 \tQuery\tthread_id=1\texec_time=0\terror_code=0\txid=0',
      'ROLLBACK TO `s`',
      '/*!*/;',
      '#261206  9:09:12 server id 7  end_log_pos 230 CRC32 0x1 \tQuery\tthread_id=1\texec_time=0\terror_code=0\txid=0',
      'COMMIT',
      '/*!*/;',
    ].join('\n');
    expect(parseAll(text, 'mariadb-bin.000001').map(at).filter(Boolean)).toEqual(['mariadb-bin.000001:230']);
  });
});

describe('binlog positions compare by file number, then offset', () => {
  it('orders files by their number, past six digits too', () => {
    expect(atOrPast({ file: 'mariadb-bin.000010', pos: 4 }, { file: 'mariadb-bin.000009', pos: 900 })).toBe(true);
    expect(atOrPast({ file: 'mariadb-bin.1000000', pos: 4 }, { file: 'mariadb-bin.999999', pos: 900 })).toBe(true);
    expect(atOrPast({ file: 'mariadb-bin.999999', pos: 900 }, { file: 'mariadb-bin.1000000', pos: 4 })).toBe(false);
    expect(atOrPast({ file: 'mariadb-bin.000009', pos: 591 }, { file: 'mariadb-bin.000009', pos: 591 })).toBe(true);
    expect(atOrPast({ file: 'mariadb-bin.000009', pos: 546 }, { file: 'mariadb-bin.000009', pos: 591 })).toBe(false);
  });
});

/** A catch-up of d.t whose mariadb-binlog is `fake` and whose connections record the keys it re-copies. */
function tailerOver(fake: string, start: { file: string; pos: number }, queryMs = 0) {
  const resynced: unknown[] = [];
  const conn = {
    async query(q: string | { sql: string; values?: unknown[] }, values?: unknown[]) {
      if (queryMs > 0) await new Promise((r) => setTimeout(r, queryMs));
      const sql = typeof q === 'string' ? q : q.sql;
      if (sql.startsWith('DELETE')) resynced.push(...(values ?? []));
      return [[]];
    },
  };
  const logs: string[] = [];
  const logger = { warn() {}, info: (_o: unknown, msg: string) => logs.push(msg), debug() {}, error() {} };
  const tailer = new BinlogTailer({
    binlogLogin: { host: 'h', port: 1, user: 'u', password: 'p' }, src: conn as never, dst: conn as never,
    from: { db: 'd', table: 't' }, to: { db: 'd', table: 't' }, shape: { columns: ['id'], key: [{ name: 'id', ordinal: 1 }] },
    start, logger: logger as never, mariadbBinlog: fake, pollMs: 60_000,
  });
  return { tailer, resynced, logs };
}

describe('the tailer reaches every position of an idle source, across rotations', () => {
  /**
   * A stand-in for mariadb-binlog that writes like it: through a fully buffered stdio stream
   * (sed), the recorded output and then nothing, as a --stop-never dump of an idle master.
   */
  async function bufferedDump(): Promise<{ dir: string; fake: string }> {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'kcm-catch-up-test-'));
    const fake = path.join(dir, 'fake-binlog.sh');
    await writeFile(path.join(dir, 'out.txt'), RECORDED);
    await writeFile(fake, `#!/bin/sh\n(cat "${dir}/out.txt"; sleep 8) | sed ''\n`, { mode: 0o755 });
    return { dir, fake };
  }
  const position = (end: string) => ({ file: end.split(':')[0], pos: Number(end.split(':')[1]) });

  it('applies up to the Binlog_checkpoint that ends the output, having crossed three rotations', async () => {
    const { dir, fake } = await bufferedDump();
    const { tailer, resynced, logs } = tailerOver(fake, { file: 'mariadb-bin.000006', pos: 344 });
    try {
      await tailer.start();
      for (const end of GROUP_ENDS) await tailer.waitFor(position(end), 5_000);
      expect(tailer.applied).toEqual({ file: 'mariadb-bin.000009', pos: 591 });
      expect(tailer.rotationsCrossed).toBe(3);
      expect(logs.filter((m) => m === 'move catch-up crossed a binlog rotation')).toHaveLength(3);
      expect(new Set(resynced)).toEqual(new Set(['10', '11', '12']));
    } finally {
      await tailer.stop();
      await rm(dir, { recursive: true, force: true });
    }
  }, 20_000);

  it('without stdbuf -o0 the buffered tail never arrives: the reported failure', async () => {
    const { dir, fake } = await bufferedDump();
    // A stdbuf that changes nothing: drops -o0 and runs the dump as it is.
    const noStdbuf = path.join(dir, 'no-stdbuf.sh');
    await writeFile(noStdbuf, '#!/bin/sh\nshift\nexec "$@"\n', { mode: 0o755 });
    const { tailer } = tailerOver(fake, { file: 'mariadb-bin.000006', pos: 344 });
    (tailer as unknown as { o: { stdbuf: string } }).o.stdbuf = noStdbuf;
    try {
      await tailer.start();
      // sed wrote 8,192 bytes; the last transaction and the checkpoint after it wait in its buffer for good.
      await expect(tailer.waitFor(position('mariadb-bin.000009:591'), 1_500)).rejects.toThrow(/catch-up did not reach mariadb-bin.000009:591 within 1500 ms/);
      expect(atOrPast(tailer.applied, position('mariadb-bin.000009:546'))).toBe(false);
    } finally {
      await tailer.stop();
      await rm(dir, { recursive: true, force: true });
    }
  }, 20_000);

  it('a flush asked for while one runs resolves only after the keys read meanwhile are applied', async () => {
    // Each statement of the re-copy takes 20 ms: the second transaction is read while the first is being applied.
    const { tailer, resynced } = tailerOver('/bin/false', { file: 'mariadb-bin.000001', pos: 4 }, 20);
    const feed = (line: string) => (tailer as unknown as { onLine(l: string): void }).onLine(line);
    const txn = (id: number, end: number) => [
      `#261206  9:09:12 server id 7  end_log_pos ${end - 40} CRC32 0x1 \tGTID 0-7-${id} trans`,
      'START TRANSACTION',
      '### INSERT INTO `d`.`t`',
      '### SET',
      `###   @1=${id}`,
      `#261206  9:09:12 server id 7  end_log_pos ${end} CRC32 0x1 \tXid = ${id}`,
      'COMMIT/*!*/;',
    ];
    txn(1, 100).forEach(feed);
    const first = tailer.flush();
    await new Promise((r) => setTimeout(r, 5));
    // Read while the first flush runs (the reader and a cut-over's flush side by side).
    txn(2, 200).forEach(feed);
    await tailer.flush();
    expect(resynced).toEqual(['1', '2']);
    expect(tailer.applied).toEqual({ file: 'mariadb-bin.000001', pos: 200 });
    await first;
  });
});
