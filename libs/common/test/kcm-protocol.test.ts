// The skew rule of the kcm protocol exchange (docs/upgrade.md): this build talks to its own
// protocol and the one before it; a peer that states none is protocol 1; anything else is
// refused with words naming both versions and what to do.

import { describe, expect, it } from 'vitest';
import { KCM_PROTOCOL, KCM_PROTOCOL_OLDEST, protocolRefusal, readPeerProtocol, type PeerProtocol } from '@kcm/common';

const refused = (p: PeerProtocol) => {
  if (p.ok) throw new Error(`expected a refusal, got protocol ${p.protocol} accepted`);
  return p;
};

describe('kcm protocol skew rule', () => {
  it('this build is protocol 2 and talks to 1 and 2', () => {
    expect(KCM_PROTOCOL).toBe(2);
    expect(KCM_PROTOCOL_OLDEST).toBe(1);
    expect(readPeerProtocol('1')).toEqual({ ok: true, protocol: 1 });
    expect(readPeerProtocol('2')).toEqual({ ok: true, protocol: 2 });
  });

  it('a peer that states no protocol (the build before the exchange) is protocol 1', () => {
    expect(readPeerProtocol(undefined)).toEqual({ ok: true, protocol: 1 });
  });

  it('refuses older (0), newer (3) and unreadable versions', () => {
    expect(refused(readPeerProtocol('0')).why).toBe('older');
    expect(refused(readPeerProtocol('3')).why).toBe('newer');
    for (const garbage of ['', 'two', '2.0', '-1', '2; drop', '99999999']) expect(refused(readPeerProtocol(garbage)).why).toBe('unreadable');
  });

  it('the refusal names both versions and says which side to upgrade', () => {
    const agent = { kind: 'agent', name: '127.0.2.1:58100' } as const;
    const manager = { kind: 'manager', name: '127.0.1.2' } as const;
    expect(protocolRefusal(manager, agent, refused(readPeerProtocol('3')))).toMatch(/^manager 127\.0\.1\.2 speaks kcm protocol 3; this agent 127\.0\.2\.1:58100 \(kcm [0-9.]+\) accepts kcm protocol 1-2: upgrade this agent first/);
    expect(protocolRefusal(manager, agent, refused(readPeerProtocol('0')))).toMatch(/speaks kcm protocol 0; .* accepts kcm protocol 1-2: upgrade the manager 127\.0\.1\.2 first/);
    expect(protocolRefusal(manager, agent, refused(readPeerProtocol('x')))).toMatch(/states kcm protocol "x", which is not a protocol version/);
  });
});
