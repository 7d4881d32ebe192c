// A real gateway on 127.0.0.1 over the fake job service, and an in-process kcm with captured output.

import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { silentLogger } from '@kcm/common';
import { buildGateway, type EmitAuth } from '../../manager/src/gateway/index';
import { FakeJobService } from '../../manager/test/gateway/fake-job-service';
import { main } from '../src/main';
import type { CliIo } from '../src/io';

export interface LiveGateway {
  url: string;
  service: FakeJobService;
  app: FastifyInstance;
  close: () => Promise<void>;
}

/** Without `auth` the gateway serves every caller (insecure mode): most CLI tests are not about tokens. */
export async function startGateway(auth: EmitAuth = { insecure: true }): Promise<LiveGateway> {
  const service = new FakeJobService();
  const app = buildGateway({ service, logger: silentLogger(), auth });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, service, app, close: () => app.close() };
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function runKcm(
  argv: string[],
  options: { url?: string; tty?: boolean; env?: Record<string, string>; fetch?: typeof fetch; sleep?: (ms: number) => Promise<void> } = {},
): Promise<RunResult> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: { write: (text: string) => (stdout += text), isTTY: options.tty ?? false, columns: 120 },
    stderr: { write: (text: string) => (stderr += text) },
    // No local deployment's token and no context file unless a test gives one (a `kcm local up` in this checkout, or the user's ~/.config/kcm, must not leak in).
    env: { USER: 'alice', KCM_LOCAL_DIR: '/nonexistent/kcm-local', KCM_CONFIG: '/nonexistent/kcm-config.json', ...(options.url ? { KCM_URL: options.url } : {}), ...options.env },
    fetch: options.fetch,
    sleep: options.sleep,
  };
  const code = await main(argv, io);
  return { code, stdout, stderr };
}
