// Fakes for the logical backup logic: in-memory backup storage, and agents whose shards
// hold fixed tables and whose dumps are a few bytes naming what they dump.

import { createHash } from 'node:crypto';
import { createLogger } from '@kcm/common';
import type { CatalogChange, LogicalDump, LogicalDumpParams, MariaDbLogicalAgentClient, Agents } from '@kcm/agent-api';
import type { LogicalBackupDeps } from '../../src/backup/logical-run';
import type { LogicalDumpStorage } from '../../src/backup/logical-storage';

export class MemoryDumpStorage implements LogicalDumpStorage {
  readonly record = { name: 'mem' };
  readonly objects = new Map<string, Buffer>();
  puts = 0;

  async put(key: string, data: AsyncIterable<Uint8Array>) {
    const chunks: Buffer[] = [];
    for await (const c of data) chunks.push(Buffer.from(c));
    const bytes = Buffer.concat(chunks);
    this.objects.set(key, bytes);
    this.puts++;
    return { bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') };
  }

  async *get(key: string): AsyncGenerator<Buffer> {
    const bytes = this.objects.get(key);
    if (!bytes) throw new Error(`no object ${key}`);
    yield bytes;
  }

  async verify(key: string) {
    return this.objects.has(key) ? { ok: true, problem: '' } : { ok: false, problem: 'missing' };
  }

  close(): void {}
}

export interface FakeLogicalAgents {
  deps: LogicalBackupDeps;
  storage: MemoryDumpStorage;
  /** Tables (`database.table`) each host's master holds. */
  tablesOf: Map<string, string[]>;
  /** Partitions among them: `database.partition` -> `database.parent` (kcm_ddl's COMMENT). */
  partitionOf: Map<string, string>;
  dumps: { host: string; params: LogicalDumpParams }[];
  loads: { host: string; opId: string; port: number; text: string }[];
  /** While set, a dump streams its first chunk and then waits for this promise. */
  hold?: Promise<void>;
  /** While > 0, dumps fail (counted down). */
  failDumps: number;
  /** What every compute node's catalog sync answers it changed (or skipped). */
  syncChanges: CatalogChange[];
}

export function fakeLogicalAgents(): FakeLogicalAgents {
  const storage = new MemoryDumpStorage();
  const f: FakeLogicalAgents = {
    storage,
    tablesOf: new Map(),
    partitionOf: new Map(),
    dumps: [],
    loads: [],
    failDumps: 0,
    syncChanges: [],
    deps: undefined as unknown as LogicalBackupDeps,
  };
  const agents = {
    mariadb: (host: string) => ({ listTables: async () => ({ tables: f.tablesOf.get(host) ?? [] }) }),
    postgres: () => ({ syncCatalog: async () => ({ changes: f.syncChanges, servers_changed: [], foreign_tables: 0, elapsed_ms: 1 }) }),
  } as unknown as Agents;
  /** The agent's resolution (logical-objects.ts): a table, else a partitioned parent's partitions; databases whole; a prefix. */
  const resolve = (host: string, params: LogicalDumpParams): string[] =>
    (f.tablesOf.get(host) ?? []).filter((t) => {
      const db = t.slice(0, t.indexOf('.'));
      if (params.tables?.length) return params.tables.some((n) => t === `${params.databases![0]}.${n}` || f.partitionOf.get(t) === `${params.databases![0]}.${n}`);
      return params.databases?.includes(db) || (!!params.databasePrefix && db.startsWith(params.databasePrefix));
    });
  const logicalAgent = (host: string) =>
    ({
      async tablesOf(params: LogicalDumpParams): Promise<string[]> {
        return resolve(host, params);
      },
      async dump(params: LogicalDumpParams): Promise<LogicalDump> {
        f.dumps.push({ host, params });
        if (f.failDumps > 0) {
          f.failDumps--;
          throw new Error('mariadb-dump exited 2');
        }
        const tables = resolve(host, params);
        let cancelled = false;
        let onCancel!: () => void;
        const cancel = new Promise<void>((r) => (onCancel = r));
        const hold = f.hold;
        async function* data(): AsyncGenerator<Buffer> {
          yield Buffer.from(`-- dump of ${tables.join(' ')} from ${host}\n`);
          if (hold) await Promise.race([hold, cancel]);
          if (cancelled) throw new Error('cancelled'); // as the real stream fails when cancelled
        }
        return { tables, data: data(), cancel: () => ((cancelled = true), onCancel()) };
      },
      async load(opId: string, port: number, data: AsyncIterable<Buffer>) {
        let text = '';
        for await (const c of data) text += c.toString();
        f.loads.push({ host, opId, port, text });
        return { bytes: text.length, elapsed_ms: 1 };
      },
      close() {},
    }) as unknown as MariaDbLogicalAgentClient;
  Object.assign(agents, { mariadbLogical: logicalAgent });
  f.deps = {
    agents,
    openStorage: () => storage,
    logger: createLogger({ name: 'test', level: 'silent' }),
  };
  return f;
}
