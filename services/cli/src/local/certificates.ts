// `kcm local up`'s PKI: a CA under <dir>/tls and a certificate per manager (role manager)
// and agent (role agent) naming its loopback address, issued with Debian's openssl by the
// same code the deploy script mirrors (@kcm/agent-api tls/issue.ts). Created once; a
// restart reuses them (a certificate is reissued only when it no longer fits its host).

import path from 'node:path';
import { ensureCa, issueCert } from '@kcm/agent-api';
import type { Topology } from './topology';

export function issueLocalCertificates(topology: Topology): void {
  const ca = ensureCa(path.join(topology.dir, 'tls'), '/CN=kcm local CA');
  const certs = path.join(topology.dir, 'tls', 'certs');
  for (const m of topology.managers) issueCert(ca, certs, { name: path.basename(m.tls.cert, '.pem'), role: 'manager', hosts: [m.host] });
  for (const a of topology.agents) issueCert(ca, certs, { name: path.basename(a.tls.cert, '.pem'), role: 'agent', hosts: [a.hostaddr] });
}
