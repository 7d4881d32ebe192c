// Every member learns which kcm build each other member runs (group/member-versions.ts): a
// member of this build answers Member.Describe; one of the previous build has no Member
// service (UNIMPLEMENTED: protocol 1, release unknown); one that does not answer is unknown,
// and after it answered once, its last answer stands while it is down for a restart.

import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { KCM_PROTOCOL, KCM_VERSION, silentLogger } from '@kcm/common';
import { memberServiceDefinition, memberServiceImplementation } from '../../src/group/member-describe';
import { managerProtocolIdentity, MemberVersions } from '../../src/group/member-versions';

const servers: grpc.Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.forceShutdown();
});

/** A member's Raft port (`member` port + 1): this build's Member service, or none (the previous build). */
async function serveMember(member: string, thisBuild: boolean): Promise<grpc.Server> {
  const server = new grpc.Server();
  if (thisBuild) server.addService(memberServiceDefinition, memberServiceImplementation(member, Date.now()));
  const [host, port] = member.split(':');
  await new Promise<void>((resolve, reject) => server.bindAsync(`${host}:${Number(port) + 1}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  servers.push(server);
  return server;
}

describe('member versions', () => {
  it('learns protocol 2 from a member of this build, 1 from one of the previous build, and unknown from one that does not answer', async () => {
    const [self, current, previous, absent] = ['127.9.6.1:47010', '127.9.6.2:47010', '127.9.6.3:47010', '127.9.6.4:47010'];
    const currentServer = await serveMember(current, true);
    await serveMember(previous, false);
    const versions = new MemberVersions({ self, members: () => [self, current, previous, absent], identity: managerProtocolIdentity(self, silentLogger()), logger: silentLogger(), deadlineMs: 1000 });
    try {
      const seen = await versions.measure();
      expect(seen.map((m) => [m.member, m.protocol, m.kcmVersion])).toEqual([
        [self, KCM_PROTOCOL, KCM_VERSION],
        [current, 2, KCM_VERSION],
        [previous, 1, ''],
        [absent, undefined, ''],
      ]);
      expect(seen[3].lastError).toBeDefined();
      // A member down for its restart is still the build it was.
      currentServer.forceShutdown();
      const again = await versions.measure();
      expect(again[1]).toMatchObject({ member: current, protocol: 2, kcmVersion: KCM_VERSION, lastError: expect.any(String) });
    } finally {
      versions.stop();
    }
  });
});
