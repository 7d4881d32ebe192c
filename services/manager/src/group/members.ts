// Manager members are named by their HTTP address `<host>:<port>`; the Raft transport of a
// member listens on port + 1. One address per member keeps raft_mission, leader hints and
// request forwarding in the same vocabulary.

import type { ConfState, Message, NodeId, Transport } from '@kcm/raft';

export function splitMember(member: string): { host: string; port: number } {
  const i = member.lastIndexOf(':');
  return { host: member.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(member.slice(i + 1)) };
}

export function raftAddressOf(member: NodeId): string {
  const { host, port } = splitMember(member);
  return `${host.includes(':') ? `[${host}]` : host}:${port + 1}`;
}

export function httpUrlOf(member: NodeId): string {
  const { host, port } = splitMember(member);
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * Keeps the transport's address book a superset of everyone this member talks to: the
 * configured members, every member a configuration entry names, and any member that sent
 * us a message (a joining learner must be able to answer the leader that contacted it).
 */
export class PeerDirectory {
  private readonly known = new Set<NodeId>();

  constructor(private readonly transport: Pick<Transport, 'setPeers'>, initial: Iterable<NodeId>) {
    for (const id of initial) this.known.add(id);
    this.publish();
  }

  learn(ids: Iterable<NodeId>): void {
    let changed = false;
    for (const id of ids) {
      if (!this.known.has(id)) {
        this.known.add(id);
        changed = true;
      }
    }
    if (changed) this.publish();
  }

  learnConf(conf: ConfState): void {
    this.learn([...conf.voters, ...conf.learners]);
  }

  learnSender(m: Message): void {
    if (!this.known.has(m.from)) this.learn([m.from]);
  }

  private publish(): void {
    this.transport.setPeers(Object.fromEntries([...this.known].map((id) => [id, raftAddressOf(id)])));
  }
}
