// Closing this host's TCP connections to a fenced old master (CutConnectionsTo). A compute
// node's session blocked on a statement the old master has not answered would otherwise be
// answered whenever the old master's reply gets through (a healed partition: TCP delivers
// it late), acknowledging a write its replacement never saw. `ss -K` closes the socket
// under the waiting session now: the statement fails with a lost connection, an outcome the
// client must treat as unknown, never as done.

import net from 'node:net';
import type { Logger } from '@kcm/common';
import { AgentFailure, type MariaDbCutConnectionsReply, type MariaDbCutConnectionsRequest } from '@kcm/agent-api';
import { exec } from '../../../ops/exec';

export async function cutConnectionsTo(log: Logger, req: MariaDbCutConnectionsRequest): Promise<MariaDbCutConnectionsReply> {
  if (!net.isIP(req.host)) throw new AgentFailure('invalid_argument', `host ${JSON.stringify(req.host)} is not an IP address`);
  if (!(Number.isInteger(req.port) && req.port > 0 && req.port < 65_536)) throw new AgentFailure('invalid_argument', `port ${req.port} is not a port`);
  const { stdout } = await exec('ss', ['-K', '-t', '-n', 'dst', req.host, 'dport', '=', String(req.port)], { timeoutMs: 10_000 });
  // ss lists what it closed under a header line.
  const closed = stdout.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('State')).length;
  if (closed > 0) log.warn({ host: req.host, port: req.port, closed }, 'connections to a fenced master closed');
  return { closed };
}
