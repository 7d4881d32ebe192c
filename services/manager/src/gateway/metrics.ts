// Prometheus metrics of the Emit endpoint. Label values are bounded: job_type is a canonical
// job type or "unknown" (never the raw string a client sent), outcome is "ok" or an error
// name from the catalog, lower-cased.

import { Counter, Histogram, Registry } from 'prom-client';

export const EMIT_LABELS = ['job_type', 'outcome'] as const;
type EmitLabel = (typeof EMIT_LABELS)[number];

export interface EmitMetrics {
  readonly registry: Registry;
  observe(jobTypeLabel: string, outcome: string, seconds: number): void;
}

// Emit latencies run from sub-millisecond (a rejected body) to seconds (a commit under load).
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Reuse a metric when the registry already has it (two gateways sharing one registry). */
function existing<T>(registry: Registry, name: string): T | undefined {
  return registry.getSingleMetric(name) as T | undefined;
}

export function createEmitMetrics(registry: Registry = new Registry()): EmitMetrics {
  const requests =
    existing<Counter<EmitLabel>>(registry, 'kcm_emit_requests_total') ??
    new Counter({
      name: 'kcm_emit_requests_total',
      help: 'Emit requests answered, by canonical job type and outcome (ok or error name).',
      labelNames: EMIT_LABELS,
      registers: [registry],
    });
  const duration =
    existing<Histogram<EmitLabel>>(registry, 'kcm_emit_request_duration_seconds') ??
    new Histogram({
      name: 'kcm_emit_request_duration_seconds',
      help: 'Time from receiving an Emit request to sending its reply, by canonical job type and outcome.',
      labelNames: EMIT_LABELS,
      buckets: DURATION_BUCKETS,
      registers: [registry],
    });
  return {
    registry,
    observe(jobTypeLabel, outcome, seconds) {
      const labels = { job_type: jobTypeLabel, outcome };
      requests.inc(labels);
      duration.observe(labels, seconds);
    },
  };
}
