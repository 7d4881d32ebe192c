// The agent's /metrics over plain HTTP on its host address (default port: the gRPC port + 2,
// beside the data plane's + 1). Plain HTTP because the figures carry no secret (no password,
// no token, no row) and Prometheus scrapes it without a client certificate; keep the port to
// the monitoring network (docs/agent-metrics.md). Anything but GET /metrics is 404.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Logger } from '@kcm/common';

export interface RunningMetricsListener {
  /** `host:port` bound. */
  address: string;
  close(): Promise<void>;
}

export async function startMetricsListener(opts: { hostaddr: string; port: number; registry: Registry; logger: Logger }): Promise<RunningMetricsListener> {
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics is served here\n');
      return;
    }
    opts.registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': opts.registry.contentType }).end(text),
      (err: unknown) => {
        opts.logger.warn({ err }, 'metrics scrape failed');
        res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics failed; the agent log says why\n');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.hostaddr, () => (server.off('error', reject), resolve()));
  });
  const bound = (server.address() as AddressInfo).port;
  const address = `${opts.hostaddr.includes(':') ? `[${opts.hostaddr}]` : opts.hostaddr}:${bound}`;
  opts.logger.info({ address }, 'agent metrics listening (plain HTTP, GET /metrics)');
  return {
    address,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}
