// Shared set-up for gateway tests: an app over the fake service with its log lines captured.

import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { createLogger } from '@kcm/common';
import { buildGateway, type GatewayOptions } from '../../src/gateway/index';
import { FakeJobService } from './fake-job-service';

export interface TestGateway {
  app: FastifyInstance;
  service: FakeJobService;
  registry: Registry;
  logLines: () => Record<string, unknown>[];
}

export function testGateway(options: Partial<GatewayOptions> = {}, logLevel: 'info' | 'debug' = 'info'): TestGateway {
  const chunks: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  const service = new FakeJobService();
  const registry = new Registry();
  const app = buildGateway({
    service,
    registry,
    logger: createLogger({ name: 'gateway', level: logLevel, destination }),
    // Tests of other gateway behaviour run without tokens; auth-metrics-logs.test.ts passes tokens.
    auth: { insecure: true },
    ...options,
  });
  const logLines = () =>
    chunks
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  return { app, service, registry, logLines };
}

export function envelope(jobType: string, paras: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) {
  return { version: '1.0', job_id: '', job_type: jobType, timestamp: String(Math.floor(Date.now() / 1000)), user_name: 'tester', paras, ...extra };
}

export const MACHINE_PARAS = {
  hostaddr: '127.0.2.1',
  machine_type: 'storage',
  port_range: '57000-57999',
  rack_id: 'rack-1',
  datadir: '/var/lib/kcm/data',
  logdir: '/var/lib/kcm/log',
  wal_log_dir: '/var/lib/kcm/wal',
  comp_datadir: '/var/lib/kcm/comp',
  total_mem: '4096',
  total_cpu_cores: '4',
};

export async function emit(app: FastifyInstance, body: unknown, headers: Record<string, string> = {}) {
  const response = await app.inject({
    method: 'POST',
    url: '/HttpService/Emit',
    headers: { 'content-type': 'application/json', ...headers },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.statusCode, headers: response.headers, body: response.json() as Record<string, unknown> };
}
