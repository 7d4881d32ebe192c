// A manager's call to an agent carries a transfer ticket exactly when the request names
// other agents, scoped to those agents, to the called host and to the call's deadline.

import { describe, expect, it } from 'vitest';
import { TICKET_KEY, ticketMetadataFor, useInsecure } from '@kcm/agent-api';
import { useTestTls } from '../../../test/helpers/pki';

const payloadOf = (md: ReturnType<typeof ticketMetadataFor>) => JSON.parse(Buffer.from(String(md!.get(TICKET_KEY)[0]).split('.')[0]!, 'base64url').toString('utf8'));

describe('transfer tickets', () => {
  it('names the called host as holder and exactly the agents in the request as targets', () => {
    useTestTls(['127.0.1.1']);
    const request = { port: 3306, source: { agent_address: '127.0.2.2:58100', port: 3306 }, objects: [{ storage_agent_address: '127.0.2.3:58100', key: 'k' }] };
    const md = ticketMetadataFor('127.0.2.1:58100', request, 10_000, 1_000);
    expect(payloadOf(md)).toEqual({ v: 1, holder: '127.0.2.1', targets: ['127.0.2.2:58100', '127.0.2.3:58100'], exp: 1_000 + 10_000 + 60_000 });
  });

  it('is absent from a request that names no other agent, and from plaintext links', () => {
    useTestTls(['127.0.1.1']);
    expect(ticketMetadataFor('127.0.2.1:58100', { port: 3306 }, 10_000)).toBeUndefined();
    useInsecure();
    expect(ticketMetadataFor('127.0.2.1:58100', { source: { agent_address: '127.0.2.2:58100' } }, 10_000)).toBeUndefined();
  });

  it('is never minted by an agent', () => {
    useTestTls(['127.0.2.1'], 'agent');
    expect(ticketMetadataFor('127.0.2.2:58100', { source: { agent_address: '127.0.2.3:58100' } }, 10_000)).toBeUndefined();
  });
});
