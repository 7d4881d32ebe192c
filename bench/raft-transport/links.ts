// The links the transport benchmarks run over: mutual TLS like a manager's (one manager
// certificate naming both loopback hosts, the role checked per call), or plaintext with
// INSECURE=1, to measure what TLS costs.

import { callerGuard, useTls, loadTlsMaterial } from '@kcm/agent-api';
import { testCert } from '../../test/helpers/pki';

export function benchLinks(hosts: string[]): { serverInterceptors: ReturnType<typeof callerGuard>[] } {
  const insecure = process.env.INSECURE === '1';
  if (!insecure) useTls(loadTlsMaterial(testCert('manager', hosts), 'manager'));
  console.log(`links: ${insecure ? 'plaintext (INSECURE=1)' : 'mutual TLS'}`);
  return { serverInterceptors: [callerGuard({ kind: 'managers' })] };
}
