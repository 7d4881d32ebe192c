// Who may call a kcm gRPC server, checked per call before any handler runs (a server
// interceptor: the TLS handshake already proved the certificate is the CA's; this reads
// its role). Managers' Raft/forward servers take managers only; agents take managers, and
// other agents only on the data-plane methods with a manager's transfer ticket (ticket.ts).
// Refusals: UNAUTHENTICATED without a client certificate, PERMISSION_DENIED for a wrong
// role or ticket. With plaintext links (`--insecure`) nothing is checked.

import { X509Certificate } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { activeTls } from '../credentials';
import { roleOf } from './material';
import { DATA_PLANE_METHODS, servedTicket, ticketOf, ticketRefusal, type Ticket } from './ticket';

export type CallerPolicy =
  | { kind: 'managers' }
  /** An agent's server; `self()` is its address as managers name it (`hostaddr:port`). */
  | { kind: 'agent'; self: () => string };

interface Refusal {
  code: grpc.status;
  details: string;
}

function refusalOf(policy: CallerPolicy, path: string, call: grpc.ServerInterceptingCallInterface, md: grpc.Metadata): Refusal | undefined {
  const material = activeTls();
  if (!material) return undefined;
  const raw = call.getAuthContext().sslPeerCertificate?.raw;
  if (!raw) return { code: grpc.status.UNAUTHENTICATED, details: `${path}: a client certificate signed by the cluster CA is required` };
  const cert = new X509Certificate(raw);
  const role = roleOf(cert);
  if (role === 'manager') return undefined;
  if (role === 'agent' && policy.kind === 'agent' && DATA_PLANE_METHODS.has(path)) {
    const why = ticketRefusal(ticketOf(md), cert, policy.self(), material.cas);
    return why ? { code: grpc.status.PERMISSION_DENIED, details: `${path}: ${why}` } : undefined;
  }
  return { code: grpc.status.PERMISSION_DENIED, details: `${path}: only a manager certificate may call this (the caller's role is ${role ?? 'none'})` };
}

export function callerGuard(policy: CallerPolicy): grpc.ServerInterceptor {
  return (method, call) => {
    let ticket: Ticket | undefined;
    return new grpc.ServerInterceptingCall(call, {
      start(next) {
        next({
          onReceiveMetadata(md, pass) {
            const refusal = refusalOf(policy, method.path, call, md);
            if (refusal) {
              call.sendStatus({ ...refusal, metadata: new grpc.Metadata() });
              return;
            }
            if (activeTls()?.role === 'agent') ticket = ticketOf(md);
            pass(md);
          },
          // The handler runs here (grpc-js starts unary and server-streaming handlers on half
          // close), so the calls it makes to other agents carry the served call's ticket.
          onReceiveHalfClose(pass) {
            if (ticket) servedTicket.run(ticket, pass);
            else pass();
          },
        });
      },
    });
  };
}
