// logical_backup / logical_restore paras in every form the spec admits (2.6, 2.7, 4.4):
// the type given or inferred from the db_table shape, the older flat restore form, and
// clear refusals naming the field.

import { describe, expect, it } from 'vitest';
import { parseRequest, type AnyValidRequest } from '../src/index';
import { loadFixture, type Envelope } from './fixtures';

function accept(body: Envelope): AnyValidRequest {
  const result = parseRequest(body);
  if (!result.ok) throw result.error;
  return result.request;
}

function refusal(body: Envelope): { field: string; message: string } {
  const result = parseRequest(body);
  if (result.ok) throw new Error(`accepted: ${JSON.stringify(result.request.paras)}`);
  return { field: result.error.field ?? '', message: result.error.message };
}

function backupOf(entries: string[], backupType?: string): Envelope {
  const body = loadFixture('logical_backup');
  body.paras = { cluster_id: '1', backup: entries.map((db_table) => ({ db_table, backup_time: '01:00:00-02:00:00' })) };
  if (backupType !== undefined) body.paras.backup_type = backupType;
  return body;
}

describe('logical_backup paras', () => {
  it('take the backup_type given', () => {
    expect(accept(backupOf(['postgres_$$_public.t1'], 'table')).paras).toMatchObject({ backup_type: 'table' });
  });

  it.each([
    ['postgres_$$_public.t1', 'table'],
    ['postgres_$$_public', 'schema'],
    ['postgres', 'db'],
  ])('infer backup_type from the shape of %s when absent: %s', (dbTable, type) => {
    expect(accept(backupOf([dbTable])).paras).toEqual({
      cluster_id: '1',
      backup_type: type,
      backup: [{ db_table: dbTable, backup_time: '01:00:00-02:00:00' }],
    });
  });

  it('refuse entries of different shapes without a backup_type, naming the entry that differs', () => {
    expect(refusal(backupOf(['postgres_$$_public.t1', 'postgres_$$_public']))).toEqual({
      field: 'paras.backup[1].db_table',
      message: 'paras.backup[1].db_table: names a schema but backup[0].db_table names a table: give backup_type, or list objects of one type, got "postgres_$$_public"',
    });
  });

  it('refuse a db_table of no shape without a backup_type', () => {
    const r = refusal(backupOf(['postgres.public.t1']));
    expect(r.field).toBe('paras.backup[0].db_table');
    expect(r.message).toContain('backup_type not given');
  });

  it('still refuse a shape that contradicts the backup_type given', () => {
    expect(refusal(backupOf(['postgres_$$_public'], 'table')).field).toBe('paras.backup[0].db_table');
  });
});

function restoreOf(paras: Record<string, unknown>): Envelope {
  const body = loadFixture('logical_restore');
  body.paras = { src_cluster_id: '1', dst_cluster_id: '2', ...paras };
  return body;
}

describe('logical_restore paras', () => {
  it('infer restore_type from the shapes of the restore entries', () => {
    const request = accept(restoreOf({ restore: [{ db_table: 'postgres_$$_public', restore_time: '2024-03-01 12:00:00' }] }));
    expect(request.paras).toEqual({
      src_cluster_id: '1',
      dst_cluster_id: '2',
      restore_type: 'schema',
      restore: [{ db_table: 'postgres_$$_public', restore_time: '2024-03-01 12:00:00' }],
    });
  });

  it('accept the older flat form without restore_type, as one restore entry', () => {
    const request = accept(restoreOf({ db_table: 'postgres_$$_public.t1', restore_time: '2024-03-01 12:00:00' }));
    expect(request.paras).toEqual({
      src_cluster_id: '1',
      dst_cluster_id: '2',
      restore_type: 'table',
      restore: [{ db_table: 'postgres_$$_public.t1', restore_time: '2024-03-01 12:00:00' }],
    });
  });

  it('accept the older flat form with a restore_type', () => {
    const request = accept(restoreOf({ restore_type: 'db', db_table: 'postgres', restore_time: '1700000000' }));
    expect(request.paras).toMatchObject({ restore_type: 'db', restore: [{ db_table: 'postgres', restore_time: '1700000000' }] });
  });

  it('refuse the flat form without restore_time, and with a shape that contradicts restore_type', () => {
    expect(refusal(restoreOf({ db_table: 'postgres_$$_public.t1' }))).toEqual({ field: 'paras.restore_time', message: 'paras.restore_time: is required with paras.db_table' });
    expect(refusal(restoreOf({ restore_type: 'schema', db_table: 'postgres_$$_public.t1', restore_time: '1700000000' })).field).toBe('paras.db_table');
  });

  it('refuse neither form, and both forms at once', () => {
    expect(refusal(restoreOf({ restore_type: 'table' })).field).toBe('paras.restore');
    const both = refusal(restoreOf({ restore: [{ db_table: 'postgres', restore_time: '1700000000' }], db_table: 'postgres', restore_time: '1700000000' }));
    expect(both.field).toBe('paras.db_table');
  });

  it('refuse restore entries of different shapes without restore_type', () => {
    const r = refusal(restoreOf({ restore: [{ db_table: 'postgres', restore_time: '1700000000' }, { db_table: 'postgres_$$_public.t1', restore_time: '1700000000' }] }));
    expect(r.field).toBe('paras.restore[1].db_table');
  });
});
