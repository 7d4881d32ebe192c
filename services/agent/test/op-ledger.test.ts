import { mkdtempSync, readdirSync, utimesSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { OpLedger } from '../src/ops/op-ledger';

const tmpLedgerDir = () => path.join(mkdtempSync(path.join(os.tmpdir(), 'kcm-ledger-')), 'ops');

describe('op ledger', () => {
  it('runs an op once: a repeat, concurrent or later (even from a new ledger on the same dir), gets the first outcome', async () => {
    const dir = tmpLedgerDir();
    const ledger = new OpLedger(dir);
    let runs = 0;
    const op = async () => ({ run: ++runs });
    const [a, b] = await Promise.all([ledger.run('install:1', op), ledger.run('install:1', op)]);
    expect(a).toEqual({ run: 1 });
    expect(b).toEqual({ run: 1 });
    ledger.close();
    const restarted = new OpLedger(dir);
    expect(await restarted.run('install:1', op)).toEqual({ run: 1 });
    expect(runs).toBe(1);
    restarted.close();
  });

  it('forgets a failed op so that a retry runs again', async () => {
    const ledger = new OpLedger(tmpLedgerDir());
    await expect(ledger.run('x', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await ledger.run('x', async () => 'second try')).toBe('second try');
    ledger.close();
  });

  it('prunes outcomes older than the retention period and keeps recent ones', async () => {
    const dir = tmpLedgerDir();
    const ledger = new OpLedger(dir, 60_000);
    await ledger.run('old', async () => 1);
    await ledger.run('new', async () => 2);
    const longAgo = new Date(Date.now() - 120_000);
    utimesSync(path.join(dir, 'old.json'), longAgo, longAgo);
    expect(await ledger.prune()).toBe(1);
    expect(readdirSync(dir)).toEqual(['new.json']);
    ledger.close();
  });

  it('refuses an op_id that is not a plain token', async () => {
    const ledger = new OpLedger(tmpLedgerDir());
    await expect(ledger.run('../../etc/passwd', async () => 1)).rejects.toThrow(/op_id/);
    ledger.close();
  });
});
