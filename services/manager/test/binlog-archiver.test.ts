// The leader's binlog archiving round against fake agents whose masters keep binlog files
// the way mariadbd does (a flush closes the open file; a new file starts at the GTID state
// the last one ended at): what it archives, what it commits, how it follows a master
// change, and how it measures the archive lag.

import { silentLogger } from '@kcm/common';
import type { MariaDbArchiveBinlogRequest, MariaDbBinlogFile } from '@kcm/agent-api';
import { describe, expect, it } from 'vitest';
import { archivedBinlogKey, BinlogArchiver, type ArchiveAgents } from '../src/leader/binlog-archiver';
import { archiveCoversUntil, shardArchive } from '../src/meta/binlog-archive';
import { CommandKind } from '../src/meta/commands';
import { cluster } from './helpers/cluster-state';
import { LocalStore } from './helpers/local-store';
import { SecretBox } from '../src/secrets/secret-box';

/** A mariadbd's binlogs: files in order, the last one open. */
class FakeMaster {
  files: MariaDbBinlogFile[] = [];
  seq = 0;
  flushes = 0;
  constructor(readonly serverId: number, private readonly clock: () => number, startSeq = 0) {
    this.seq = startSeq;
    this.open();
  }
  private open(): void {
    const n = this.files.length + 1;
    const t = Math.floor(this.clock() / 1000);
    this.files.push({ name: `mariadb-bin.${String(n).padStart(6, '0')}`, size: 256, closed: false, start_gtid_state: this.seq ? `0-${this.serverId}-${this.seq}` : '', first_event_time: t, last_event_time: t });
  }
  write(transactions: number): void {
    const cur = this.files.at(-1)!;
    this.seq += transactions;
    cur.size += 100 * transactions;
    cur.last_event_time = Math.floor(this.clock() / 1000);
  }
  flush(): void {
    this.flushes++;
    const cur = this.files.at(-1)!;
    cur.closed = true;
    cur.last_event_time = Math.floor(this.clock() / 1000);
    this.open();
  }
}

function fakeAgents(masters: Map<string, FakeMaster>) {
  const archived: MariaDbArchiveBinlogRequest[] = [];
  const agents: ArchiveAgents = {
    mariadbRestore: (host) => ({
      async listBinlogs(port, flush) {
        const m = masters.get(`${host}:${port}`)!;
        if (flush) m.flush();
        return { files: m.files.map((f) => ({ ...f })), server_id: m.serverId };
      },
      async archiveBinlog(req) {
        const m = masters.get(`${host}:${req.port}`)!;
        const file = m.files.find((f) => f.name === req.name)!;
        if (!file.closed) throw new Error('still being written');
        archived.push(req);
        return { file, sha256: 'ab'.repeat(32), bytes: file.size };
      },
    }),
  };
  return { agents, archived };
}

function setUp() {
  let nowMs = 1_800_000_000_000;
  const clock = () => nowMs;
  const store = new LocalStore();
  store.s.clusters['1'] = cluster('1', 'ready', [['11', 'h1', 57001], ['12', 'h2', 57002]], []);
  store.s.backupStorages['main'] = { name: 'main', stype: 'fs', hostaddr: 'h9', port: 58100, path: '/backups', createdAt: 0 };
  const masters = new Map([['h1:57001', new FakeMaster(11, clock)], ['h2:57002', new FakeMaster(12, clock)]]);
  const { agents, archived } = fakeAgents(masters);
  const archiver = new BinlogArchiver({ store, agents, logger: silentLogger(), now: clock, idleFlushMs: 60_000, secrets: SecretBox.unkeyed() });
  return { store, masters, archived, archiver, advance: (ms: number) => (nowMs += ms), clock };
}

describe('binlog archiving round', () => {
  it('closes the master\'s binlog and archives every closed file once, committed with its GTID states', async () => {
    const { store, masters, archived, archiver, advance } = setUp();
    masters.get('h1:57001')!.write(5);
    await archiver.archiveAll();
    const archive = shardArchive(store.s, '1', '11')!;
    expect(archive.files.map((f) => f.name)).toEqual(['mariadb-bin.000001']);
    expect(archive.files[0]).toMatchObject({ key: archivedBinlogKey('1', '11', 11, { name: 'mariadb-bin.000001', first_event_time: 1_800_000_000 }), storageName: 'main', startGtidState: '', endGtidState: '0-11-5', serverId: 11 });
    expect(archived[0].target).toEqual({ storage_agent_address: 'h9:58100', root: '/backups', key: archive.files[0].key });

    advance(5000);
    masters.get('h1:57001')!.write(3);
    await archiver.archiveAll();
    await archiver.archiveAll(); // nothing new: nothing archived twice
    expect(shardArchive(store.s, '1', '11')!.files.map((f) => [f.name, f.endGtidState])).toEqual([
      ['mariadb-bin.000001', '0-11-5'],
      ['mariadb-bin.000002', '0-11-8'],
    ]);
    expect(archived).toHaveLength(2);
  });

  it('does not flush an idle master every round, but does after idleFlushMs so the archive keeps up with the clock', async () => {
    const { store, masters, archiver, advance, clock } = setUp();
    const m = masters.get('h1:57001')!;
    await archiver.archiveAll();
    const flushes = m.flushes;
    advance(5000);
    await archiver.archiveAll();
    expect(m.flushes).toBe(flushes);
    advance(60_000);
    await archiver.archiveAll();
    expect(m.flushes).toBe(flushes + 1);
    expect(archiveCoversUntil(shardArchive(store.s, '1', '11'))).toBe(Math.floor(clock() / 1000));
  });

  it('follows a master change: the new master\'s copy of archived history is skipped, its new writes archived', async () => {
    const { store, masters, archiver, advance, clock } = setUp();
    masters.get('h1:57001')!.write(10);
    await archiver.archiveAll();
    // The standby on h2 replicated those 10 (log_slave_updates) in its own files, then became master.
    advance(5000);
    const promoted = new FakeMaster(12, clock, 0);
    promoted.write(10);
    promoted.flush();
    masters.set('h2:57002', promoted);
    store.s.clusters['1'].shards['11'].masterNodeId = '12';
    advance(5000);
    // Already archived from h1 (GTIDs and time): skipped, although it is a different file.
    const before = shardArchive(store.s, '1', '11')!.files.length;
    promoted.files[0].last_event_time = Math.floor(clock() / 1000) - 20;
    promoted.write(4);
    await archiver.archiveAll();
    const after = shardArchive(store.s, '1', '11')!.files;
    expect(after.slice(before).map((f) => [f.serverId, f.hostaddr, f.endGtidState])).toEqual([[12, 'h2', '0-12-14']]);
  });

  it('archives nothing and commits nothing while no backup storage is registered', async () => {
    const { store, masters, archived, archiver } = setUp();
    delete store.s.backupStorages['main'];
    masters.get('h1:57001')!.write(5);
    await archiver.archiveAll();
    expect(archived).toHaveLength(0);
    expect(store.s.binlogArchives).toEqual({});
  });

  it('a replayed BinlogArchived (same key) changes nothing', async () => {
    const { store } = setUp();
    const file = { key: 'k', storageName: 'main', name: 'mariadb-bin.000001', serverId: 1, hostaddr: 'h1', port: 1, bytes: 1, sha256: '', startGtidState: '', endGtidState: '0-1-1', firstEventTime: 1, lastEventTime: 2, archivedAt: 0 };
    for (let i = 0; i < 2; i++) await store.propose({ kind: CommandKind.BinlogArchived, at: 5, clusterId: '1', shardId: '11', file });
    expect(shardArchive(store.s, '1', '11')!.files).toHaveLength(1);
  });
});
