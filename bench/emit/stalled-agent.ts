// A host whose agent never answers: it accepts TCP connections on the agent port and then
// stays silent. A create_machine of that host gets through the agent pool's connect check
// and then waits out the agent call's deadline (5 s) in its first step, holding the host's
// lock all that time, so every job submitted after it for the same host waits its turn in
// 'started'. bench/emit uses it to measure submissions with no job running beside them.

import net from 'node:net';

export interface StalledAgent {
  close(): void;
}

export async function startStalledAgent(host: string, port: number): Promise<StalledAgent> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {}); // the manager gives up on it at its deadline
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  return {
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}
