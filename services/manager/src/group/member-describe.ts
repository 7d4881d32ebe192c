// The Member service (proto/manager-member.proto): what a manager says about itself to the
// other members, and the one call that asks it. Loaded at run time, like forward-proto.ts.

import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { KCM_PROTOCOL, KCM_VERSION, assetPath } from '@kcm/common';
import { channelCredentials, protocolClientInterceptor, type ProtocolIdentity } from '@kcm/agent-api';

const PROTO_PATH = assetPath('proto', 'manager-member.proto');

export interface DescribeReply {
  member: string;
  protocol: number;
  kcm_version: string;
  pid: number;
  uptime_ms: number;
}

interface MemberClient extends grpc.Client {
  Describe(req: object, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, reply: DescribeReply) => void): grpc.ClientUnaryCall;
}

const definition = protoLoader.loadSync(PROTO_PATH, { keepCase: true, longs: Number, enums: String, defaults: true });
const MemberService = (grpc.loadPackageDefinition(definition) as unknown as { kcm: { manager: { v1: { Member: grpc.ServiceClientConstructor } } } }).kcm.manager.v1.Member;

export const memberServiceDefinition: grpc.ServiceDefinition = MemberService.service;

/** The Member service of the member `member` (this process). */
export function memberServiceImplementation(member: string, startedAtMs: number): grpc.UntypedServiceImplementation {
  return {
    Describe: (_call: grpc.ServerUnaryCall<object, DescribeReply>, callback: grpc.sendUnaryData<DescribeReply>) => {
      callback(null, { member, protocol: KCM_PROTOCOL, kcm_version: KCM_VERSION, pid: process.pid, uptime_ms: Date.now() - startedAtMs });
    },
  };
}

/** What one member answered: its reply, or protocol 1 for a member older than the Member service. */
export type Described = { protocol: number; kcmVersion: string; pid?: number };

/** A client of the Member service at a member's Raft address; close() when done. */
export class MemberDescriber {
  private readonly client: MemberClient;

  constructor(readonly raftAddress: string, identity: ProtocolIdentity) {
    this.client = new MemberService(raftAddress, channelCredentials(), { interceptors: [protocolClientInterceptor(raftAddress, identity)] }) as unknown as MemberClient;
  }

  /**
   * The member's protocol and release. UNIMPLEMENTED means a build from before the Member
   * service: protocol 1, release unknown (''). Any other failure (unreachable, refused) throws.
   */
  describe(deadlineMs: number): Promise<Described> {
    return new Promise((resolve, reject) => {
      this.client.Describe({}, new grpc.Metadata(), { deadline: Date.now() + deadlineMs }, (err, reply) => {
        if (!err) return resolve({ protocol: reply.protocol, kcmVersion: reply.kcm_version, pid: reply.pid });
        if (err.code === grpc.status.UNIMPLEMENTED) return resolve({ protocol: 1, kcmVersion: '' });
        reject(err);
      });
    });
  }

  close(): void {
    this.client.close();
  }
}
