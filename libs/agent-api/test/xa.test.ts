// kcm's XIDs as both sides read them: what XA RECOVER FORMAT='SQL' prints is taken as a kcm
// branch only with formatID 7037805 and kcm's ASCII form; anything else never reaches SQL.

import { describe, expect, it } from 'vitest';
import { coordinatorShardOf, isKcmBqual, isKcmGtrid, kcmXidSql, parseKcmXidSql, participantShardOf, preparingSessionOf } from '@kcm/agent-api';

const hex = (s: string) => Buffer.from(s, 'latin1').toString('hex');

describe('kcm XIDs', () => {
  it('reads a kcm branch from XA RECOVER FORMAT=\'SQL\' and writes the same literal back', () => {
    const data = `X'${hex('kcm:12:4f2a-0001')}',X'${hex('13.1')}',7037805`;
    expect(parseKcmXidSql(7037805, data)).toEqual({ gtrid: 'kcm:12:4f2a-0001', bqual: '13.1' });
    expect(kcmXidSql('kcm:12:4f2a-0001', '13.1')).toBe(data);
    expect(coordinatorShardOf('kcm:12:4f2a-0001')).toBe('12');
    expect(participantShardOf('13.1')).toBe('13');
  });

  it('ignores other formats and gtrids, and counts kcm-looking ones it cannot read as unreadable', () => {
    expect(parseKcmXidSql(1, `X'${hex('kcm:1:a')}',X'${hex('1.1')}',1`)).toBeUndefined();
    expect(parseKcmXidSql(7037805, `X'${hex('app:1:a')}',X'${hex('1.1')}',7037805`)).toBeUndefined();
    expect(parseKcmXidSql(7037805, `X'${hex('kcm:1:a b')}',X'${hex('1.1')}',7037805`)).toBe('unreadable');
    expect(parseKcmXidSql(7037805, `X'${hex('kcm:1:\u00e9')}',X'${hex('1.1')}',7037805`)).toBe('unreadable');
    expect(parseKcmXidSql(7037805, `X'${hex('kcm:1:a')}',X'${hex('x')}',7037805`)).toBe('unreadable');
    expect(parseKcmXidSql(7037805, 'garbage')).toBe('unreadable');
  });

  it('refuses what is not kcm\'s form (space, non-ASCII byte, oversize part); what passes reaches SQL as hex only', () => {
    expect(kcmXidSql("kcm:1:a'--", '1.1')).toBe(`X'${hex("kcm:1:a'--")}',X'${hex('1.1')}',7037805`);
    for (const bad of ['kcm:1:a b', 'kcm:x:a', 'kcm:1:', `kcm:1:${'a'.repeat(60)}`, 'kcm:1:\u00e9']) {
      expect(isKcmGtrid(bad), bad).toBe(false);
      expect(() => kcmXidSql(bad, '1.1')).toThrow();
    }
    for (const bad of ['1', '1.', '.1', '1.1.', '1.1.1.1', '1.1.x', "1.1'"]) expect(isKcmBqual(bad), bad).toBe(false);
    // The third part is the shard session that prepared the branch (compute nodes since it was added).
    expect(isKcmBqual('1.1.4711')).toBe(true);
    expect(preparingSessionOf('1.1.4711')).toBe('4711');
    expect(preparingSessionOf('1.1')).toBeUndefined();
    expect(isKcmGtrid(`kcm:1:${'a'.repeat(58)}`)).toBe(true); // 64 bytes
  });
});
