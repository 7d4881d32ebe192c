// What `kcm local` prints: the endpoints (as text for a person, as JSON for scripts) and the
// first commands to try against the deployment.

import { LOCAL_CREATE_CLUSTER_PARAS } from './machines';
import path from 'node:path';
import { DEFAULT_URL } from '../http-client';
import { localCaFile } from './topology';
import type { MetaAnswer } from './meta-probe';
import type { StopOutcome, ProcessState } from './processes';
import type { DeploymentRecord } from './record';
import type { ServiceStates } from './services';

export interface EndpointsJson {
  dir: string;
  managers: Array<{ member: string; url: string; pid: number; log: string }>;
  agents: Array<{ hostaddr: string; port: number; pid: number; log: string; machineFile: string }>;
}

export function endpointsJson(record: DeploymentRecord): EndpointsJson {
  return {
    dir: record.dir,
    managers: record.managers.map((m) => ({ member: m.member, url: m.url, pid: m.pid, log: m.log })),
    agents: record.agents.map((a) => ({ hostaddr: a.hostaddr, port: a.port, pid: a.pid, log: a.log, machineFile: a.machineFile })),
  };
}

/** The web console every manager serves (issue 19); any member's works, this is the first's. */
export function consoleUrl(record: DeploymentRecord): string {
  return `${record.managers[0].url}/ui/`;
}

/**
 * How to open the console: its address, and the same with the admin token in the URL
 * fragment, which the browser never sends to the server (the page moves it to the tab's
 * sessionStorage and takes it out of the address bar).
 */
export function consoleLines(record: DeploymentRecord, token: string | undefined): string[] {
  const url = consoleUrl(record);
  const lines = ['', `Web console: ${url}  (sign in with a token; a viewer token is enough)`];
  if (token !== undefined) lines.push(`  signed in as admin: ${url}#token=${token}`);
  // The managers' certificates come from the deployment's own CA, which no browser knows yet.
  lines.push(`  the browser trusts it once the local CA is imported: ${localCaFile(record.dir)} (or accept its warning once)`);
  return lines;
}

/** A path as the user can type it: relative to the working directory when inside it. */
export function shown(file: string, cwd: string): string {
  const relative = path.relative(cwd, file);
  return relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : file;
}

export function endpointLines(record: DeploymentRecord, cwd: string, states?: ServiceStates): string[] {
  const state = (s: ProcessState | undefined) => (s === undefined ? '' : `  ${s === 'running' ? 'running' : s === 'gone' ? 'STOPPED' : 'STOPPED (pid reused)'}`);
  const lines = ['Managers (HTTPS gateway, CA tls/ca.pem; Raft on the next port):'];
  record.managers.forEach((m, i) => lines.push(`  ${m.url.padEnd(24)} pid ${String(m.pid).padEnd(8)} log ${shown(m.log, cwd)}${state(states?.managers[i])}`));
  if (record.agents.length === 0) lines.push('Agents: none (--hosts 0)');
  else lines.push('Agents (gRPC, one simulated host each):');
  record.agents.forEach((a, i) => lines.push(`  ${`${a.hostaddr}:${a.port}`.padEnd(24)} pid ${String(a.pid).padEnd(8)} log ${shown(a.log, cwd)}${state(states?.agents[i])}`));
  return lines;
}

/** The flags that point later commands at this deployment when it is not the default one. */
function localFlags(record: DeploymentRecord, defaultDir: string, cwd: string): string {
  return path.resolve(record.dir) === path.resolve(defaultDir) ? '' : ` --dir ${shown(record.dir, cwd)}`;
}

export function tryLines(record: DeploymentRecord, defaultDir: string, cwd: string): string[] {
  const url = record.managers[0].url;
  const every = record.managers.map((m) => m.url).join(',');
  const urlFlag = every === DEFAULT_URL ? '' : ` --url ${every}`;
  const body = JSON.stringify({ version: '1.0', job_type: 'get_meta_mode', timestamp: String(Math.floor(Date.now() / 1000)), user_name: 'me', paras: {} });
  const lines = [
    'Try:',
    `  curl -s --cacert ${shown(localCaFile(record.dir), cwd)} -X POST ${url}/HttpService/Emit -H "Authorization: Bearer $(cat ${shown(path.join(record.dir, 'admin.token'), cwd)})" -d '${body}'`,
  ];
  if (record.agents.length > 0) {
    // Every local host is registered as storage and computer by `up`: this runs as it is.
    lines.push(`  npx kcm emit create_cluster --paras '${JSON.stringify(LOCAL_CREATE_CLUSTER_PARAS)}' --wait${urlFlag}`);
    lines.push(`  npx kcm get machine_summary${urlFlag}`);
  }
  const flags = localFlags(record, defaultDir, cwd);
  lines.push(`  npx kcm local status${flags}`, `  npx kcm local down${flags}      (add --purge to delete ${shown(record.dir, cwd)})`);
  return lines;
}

export function metaLines(answers: readonly MetaAnswer[]): string[] {
  const ok = answers.find((a) => a.state === 'ok');
  const lines: string[] = [];
  if (ok) {
    const members = ok.members?.join(', ') ?? '?';
    const leader = ok.leader ? `leader ${ok.leader}` : 'a leader is elected';
    lines.push(`Group: ${ok.mode ?? '?'}, ${leader}; members ${members}${ok.learners?.length ? `; learners ${ok.learners.join(', ')}` : ''}`);
  } else {
    lines.push('Group: no member reports a leader');
  }
  for (const a of answers) {
    lines.push(`  ${a.url.padEnd(24)} ${a.state === 'ok' ? 'answers get_meta_mode' : a.state === 'error' ? `error ${a.problem}` : `unreachable (${a.problem})`}`);
  }
  return lines;
}

export function stopLines(outcomes: readonly StopOutcome[]): string[] {
  const word: Record<StopOutcome['result'], string> = {
    stopped: 'stopped',
    killed: 'killed (did not stop in time)',
    'not-running': 'was not running',
    'still-running': 'STILL RUNNING after SIGKILL',
  };
  return outcomes.map((o) => `  ${o.label.padEnd(40)} pid ${String(o.pid).padEnd(8)} ${word[o.result]}`);
}
