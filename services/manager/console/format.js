// Pure helpers of the console: no DOM, no network, so the unit suite runs them in Node
// (services/manager/test/console/format.test.ts). Everything the server sends is treated
// as text: these helpers only build strings that lit-html then escapes where they are shown.

/** The fragment's settings: `#token=...&refresh=2000`. A fragment never reaches the server. */
export function readFragment(hash) {
  const params = new URLSearchParams(hash.startsWith('#') ? hash.slice(1) : hash);
  const token = params.get('token') ?? '';
  params.delete('token');
  const refresh = Number(params.get('refresh'));
  return {
    token: token.trim(),
    refreshMs: Number.isFinite(refresh) && refresh >= 250 ? Math.min(refresh, 60_000) : DEFAULT_REFRESH_MS,
    // What stays in the address bar once the token is taken out of it.
    rest: params.toString(),
  };
}

export const DEFAULT_REFRESH_MS = 2000;

/**
 * A member's kcm build as get_meta_mode states it: `kcm 0.2.0 (kcm-protocol 2)`, the words of
 * `kcm-manager --version`. A member not asked yet has no protocol; one older than 0.2.0 no release.
 */
export function buildText(member) {
  if (!member || !member.protocol) return 'not known yet';
  return `kcm ${member.kcm_version || 'before 0.2.0'} (kcm-protocol ${member.protocol})`;
}

/** A request envelope (spec 2.1), as the CLI builds one. */
export function envelope(jobType, paras = {}, nowMs = Date.now()) {
  return { version: '1.0', job_type: jobType, job_id: '', timestamp: String(Math.floor(nowMs / 1000)), user_name: 'console', paras };
}

/** 850 ms, 12.3 s, 3 min 05 s, 2 h 03 min. */
export function formatElapsed(msText) {
  const ms = Number(msText);
  if (msText === '' || !Number.isFinite(ms) || ms < 0) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

/** A job's progress as one line: "step 3/7 install storage nodes, 2/3 units", "queued", ... */
export function jobProgressText(job) {
  if (job.status === 'started') return 'queued';
  const steps = Number(job.steps);
  if (!steps) return job.status === 'done' ? 'done' : '';
  const name = job.step_name ? ` ${job.step_name}` : '';
  const units = job.done !== '' && job.total !== '' && job.done !== undefined ? `, ${job.done}/${job.total} units` : '';
  if (job.status === 'done') return `${steps}/${steps} steps done`;
  if (job.status === 'failed') return `failed at step ${job.step}/${steps}${name}`;
  return `step ${job.step}/${steps}${name}${units}`;
}

/** How far a job is, 0..1, counting the running step's units as a part of that step. */
export function jobFraction(job) {
  const steps = Number(job.steps);
  if (!steps) return 0;
  if (job.status === 'done') return 1;
  const finished = Math.max(0, Number(job.step) - 1);
  const done = Number(job.done);
  const total = Number(job.total);
  const partial = job.done !== '' && total > 0 ? Math.min(1, done / total) : 0;
  return Math.min(1, (finished + partial) / steps);
}

const STATUS_TONES = new Map([
  ['online', 'ok'], ['running', 'ok'], ['reachable', 'ok'], ['done', 'ok'], ['ready', 'ok'], ['leader', 'ok'], ['replicate', 'ok'],
  ['ongoing', 'busy'], ['started', 'busy'], ['creating', 'busy'], ['deleting', 'busy'], ['probe', 'warn'], ['snapshot', 'warn'],
  ['degraded', 'warn'], ['unknown', 'warn'],
  ['offline', 'bad'], ['dead', 'bad'], ['unreachable', 'bad'], ['failed', 'bad'],
]);

/** The colour class of a status word; a word the console does not know is shown plain. */
export function statusTone(status) {
  return STATUS_TONES.get(status) ?? 'plain';
}

/** What a refusal of the Emit API means for the person at the console. */
export function refusalText(httpStatus, reply, jobType) {
  const info = reply && typeof reply.error_info === 'string' ? reply.error_info : '';
  if (httpStatus === 401) return `The manager refused the token (401): ${info || 'not valid'}. Enter a valid token.`;
  if (httpStatus === 403) return `This token may not run ${jobType} (403): ${info || 'forbidden'}.`;
  if (httpStatus === 503) return `No leader right now (503): ${info || 'election in progress'}; retrying.`;
  if (reply && reply.error_code !== undefined) return `${jobType} failed (${reply.error_code}): ${info}`;
  return `${jobType}: HTTP ${httpStatus}`;
}
