// Registers hosts as machines (create_machine) through the Emit API like any client: one
// request_id per host and machine type, so a re-run or a retry never registers one twice,
// and a machine already registered (by an earlier run or by hand) is left as it is. Shared
// by `kcm deploy` and `kcm local up`.

import type { ReplyEnvelope } from '@kcm/protocol';
import { createEmitClient } from '../http-client';
import { localEnvelope, waitForLocalJob } from '../local/local-jobs';

export interface MachineRegistration {
  /** Any manager's base URL, or several comma-separated. */
  url: string;
  /** create_machine paras, one per host and machine type (hostaddr and machine_type set). */
  machines: ReadonlyArray<Record<string, string>>;
  /** Prefix of each request_id: `<prefix>-<hostaddr>-<machine_type>`. */
  requestIdPrefix: string;
  fetch?: typeof fetch;
  /** PEM of the CA of the managers' HTTPS certificates. */
  ca?: string | Buffer;
  token?: string;
  timeoutMs?: number;
}

export interface RegistrationOutcome {
  registered: string[];
  already: string[];
  /** `<host> (<type>): why`: a machine not registered. */
  problems: string[];
}

/** Registers every machine not registered yet; never throws for a refusal, it is a problem line. */
export async function registerMachines(r: MachineRegistration): Promise<RegistrationOutcome> {
  const client = createEmitClient({ url: r.url, fetch: r.fetch, ca: r.ca, timeoutMs: 10_000, token: r.token });
  const deadline = Date.now() + (r.timeoutMs ?? 60_000);
  const outcome: RegistrationOutcome = { registered: [], already: [], problems: [] };
  try {
    const summary = (await client.emit(localEnvelope('get_machine_summary', {}))).reply;
    if (summary.error_code !== '0') throw new Error(`get_machine_summary: ${summary.error_info}`);
    const listed = ((summary.attachment ?? {}) as { list_machine?: { hostaddr: string; machine_types?: string[] }[] }).list_machine ?? [];
    const known = new Set(listed.flatMap((m) => (m.machine_types ?? []).map((type) => `${m.hostaddr}/${type}`)));
    const pending: { what: string; ack: ReplyEnvelope }[] = [];
    for (const paras of r.machines) {
      const what = `${paras.hostaddr} (${paras.machine_type})`;
      if (known.has(`${paras.hostaddr}/${paras.machine_type}`)) {
        outcome.already.push(what);
        continue;
      }
      const ack = (await client.emit(localEnvelope('create_machine', paras, { request_id: `${r.requestIdPrefix}-${paras.hostaddr}-${paras.machine_type}` }))).reply;
      if (ack.error_code !== '0') outcome.problems.push(`${what}: ${ack.error_info}`);
      else pending.push({ what, ack });
    }
    for (const { what, ack } of pending) {
      const status = await waitForLocalJob(client, ack, deadline);
      if (status.status === 'done') outcome.registered.push(what);
      else outcome.problems.push(`${what}: ${status.status === 'failed' ? status.error_info : `job ${ack.job_id} still ${status.status}`}`);
    }
  } catch (err) {
    outcome.problems.push(err instanceof Error ? err.message : String(err));
  }
  return outcome;
}
