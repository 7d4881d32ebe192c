// kcm_tls_cert_expiry_timestamp_seconds: when the certificate a listener presents stops being
// valid (its notAfter, Unix seconds). One family per registry, whatever serves it: the agent's
// gRPC server, a manager's gRPC links and its HTTPS listener each add a source with their own
// `use` label. Read at scrape time, so a certificate reloaded from disk (reloading.ts) shows
// its own date at the next scrape. deploy/prometheus/kcm-alerts.yml's KcmCertificateExpiringSoon
// fires below 30 days.

import type { X509Certificate } from 'node:crypto';
import { Gauge, type Registry } from 'prom-client';

export const CERT_EXPIRY_METRIC = 'kcm_tls_cert_expiry_timestamp_seconds';

interface ExpirySource {
  labels: Record<string, string>;
  cert: () => X509Certificate | undefined;
}

const families = new WeakMap<Registry, ExpirySource[]>();

/**
 * Adds a certificate to the registry's expiry family. Every source of one registry must use
 * the same label names (a manager: member and use; an agent: use). `cert` returning undefined
 * (plaintext links) exports nothing for that source.
 */
export function exportCertExpiry(registry: Registry, labels: Record<string, string>, cert: () => X509Certificate | undefined): void {
  let sources = families.get(registry);
  if (!sources) {
    const list: ExpirySource[] = [];
    sources = list;
    families.set(registry, list);
    new Gauge({
      name: CERT_EXPIRY_METRIC,
      help: 'When the certificate this process presents expires (notAfter, Unix seconds), by use (grpc: mutual TLS links; https: Emit and the console)',
      labelNames: Object.keys(labels),
      registers: [registry],
      collect() {
        this.reset();
        for (const source of list) {
          const current = source.cert();
          if (current) this.set(source.labels, Math.floor(Date.parse(current.validTo) / 1000));
        }
      },
    });
  }
  sources.push({ labels, cert });
}
