// Help text, written for someone who has never read the code. Job types, modes, summaries
// and paras come from describeJob in @kcm/protocol (the same schemas that validate), so the
// help cannot drift from what the manager accepts.

import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { JOB_TYPES, REQUIRED_ROLE, describeJob, ERROR_CATALOG, type JobType, type ParaDescription } from '@kcm/protocol';
import { DEFAULT_URL } from './http-client';

const FIXTURES_DIR = fileURLToPath(new URL('../../../test/fixtures/emit/', import.meta.url));
const FIXTURES_SHOWN_AS = 'test/fixtures/emit';

const CONNECTION_HELP = [
  'Connection:',
  `  --url <url>       any manager of the group, or several comma-separated, tried in turn (env KCM_URL; default: the current context, else ${DEFAULT_URL})`,
  '  --ca <file>       PEM of the CA that signs the managers\' HTTPS certificates (default: the context\'s ca, else the system CAs)',
  '  --context <name>  a context of the context file instead of the current one (env KCM_CONTEXT; see kcm context --help)',
  '  --token <token>   bearer token (env KCM_TOKEN; else the context\'s token_file; else the admin token of the local deployment, .kcm/local/admin.token or $KCM_LOCAL_DIR)',
  '  --json            print the raw reply envelope instead of text',
];

const WAIT_HELP = [
  'Waiting:',
  '  --wait, -w        poll get_status until the job is done or failed (progress bar on a terminal)',
  '  --interval <s>    seconds between polls (default 1)',
  '  --timeout <s>     give up after this many seconds (default: wait forever; exit 4)',
];

function jobLine(jobType: JobType): string {
  const job = describeJob(jobType);
  const aliases = job.aliases.length > 0 ? ` (also: ${job.aliases.join(', ')})` : '';
  return `  ${jobType.padEnd(24)} ${job.mode.padEnd(5)}  ${REQUIRED_ROLE[jobType].padEnd(8)}  ${job.summary}${aliases}`;
}

export function topHelp(): string {
  return [
    'kcm: send jobs to a kcm manager group and follow them.',
    '',
    'Usage:',
    "  kcm emit <job_type> [--paras '<json>' | --file f.json] [--wait]   send any job",
    '  kcm status <job_id> [--wait]                                      show or follow an async job',
    "  kcm get <query> [--paras '<json>']                                run a query, print tables",
    '  kcm local <up|status|down> [--managers 3] [--hosts 3] [--dir D]   run managers and agents on loopback',
    '  kcm audit [--since N] | kcm audit verify --data-dir D             the audit trail; check its chain offline',
    '  kcm context list | use <name> | show [name]                       the manager groups kcm knows (~/.config/kcm/config.json)',
    '  kcm <command> --help                                              help for one command',
    '  kcm emit <job_type> --help                                        the paras of one job type',
    '',
    ...CONNECTION_HELP,
    '',
    'Job types (async: the reply is a job id to follow; sync: the reply is the answer), with the least token role that may send each',
    '(viewer < operator < admin):',
    ...JOB_TYPES.map(jobLine),
    '',
    'Examples:',
    `  kcm emit create_machine --file ${FIXTURES_SHOWN_AS}/create_machine.json --wait`,
    `  kcm emit delete_cluster --paras '{"cluster_id":"1"}'`,
    '  kcm status 12 --wait',
    `  kcm get get_cluster_detail --paras '{"cluster_name":"cluster_1700000000_000001"}'`,
    '',
    'kcm --version prints this build: kcm <release> (kcm-protocol <n>).',
    'Exit codes: 0 ok; 1 rejected or job failed; 2 usage error; 3 manager unreachable; 4 --wait timed out.',
    `Error codes: ${ERROR_CATALOG.map((e) => `${e.code} ${e.name}`).join(', ')}.`,
    '',
  ].join('\n');
}

export function emitHelp(): string {
  return [
    "Usage: kcm emit <job_type> [--paras '<json>' | --file f.json] [--wait | --dry-run] [--json]",
    '',
    'Builds the request envelope (version 1.0, timestamp now, user_name from $USER), checks it',
    'exactly as the manager will, and sends it only if it is valid.',
    '',
    'Request:',
    "  --paras, -p <json>   the job's paras as a JSON object (default {})",
    '  --file, -f <path>    a JSON file holding a whole envelope (its job_type, job_id and paras',
    `                       are used; the job type argument may then be left out) or just paras;`,
    `                       every job type has one under ${FIXTURES_SHOWN_AS}/<job_type>.json`,
    '  --job-id <id>        the job to ask about (get_status)',
    '  --request-id <key>   idempotency key: resending with the same key returns the same job;',
    '                       default: a fresh key, reused when kcm sends the job again (after',
    '                       NO_LEADER, OVERLOADED, TIMEOUT or no answer: the job may exist)',
    '  --dry-run            validate against the live state and show the plan (steps, placement,',
    '                       ports, what would be removed); nothing is committed',
    '',
    ...WAIT_HELP,
    '',
    ...CONNECTION_HELP,
    '',
    'kcm emit <job_type> --help lists that job\'s paras; kcm --help lists the job types.',
    '',
  ].join('\n');
}

function paraLines(paras: ParaDescription[], indent: string): string[] {
  const width = Math.max(0, ...paras.map((p) => p.name.length));
  const lines: string[] = [];
  for (const p of paras) {
    const need = p.required ? 'required' : 'optional';
    const dflt = p.default !== undefined ? `, default ${JSON.stringify(p.default)}` : '';
    const meaning = p.description ? `${p.description}; ` : '';
    lines.push(`${indent}${p.name.padEnd(width)}  ${need}${dflt}  ${meaning}${p.rule}`);
    if (p.items) lines.push(...paraLines(p.items, `${indent}    `));
  }
  return lines;
}

function fixtureExample(jobType: JobType): string[] {
  const path = `${FIXTURES_DIR}${jobType}.json`;
  if (!existsSync(path)) return [];
  const lines = [`  kcm emit ${jobType} --file ${FIXTURES_SHOWN_AS}/${jobType}.json`];
  try {
    const envelope = JSON.parse(readFileSync(path, 'utf8')) as { paras?: unknown; job_id?: string };
    const paras = JSON.stringify(envelope.paras ?? {});
    if (jobType === 'get_status') lines.unshift(`  kcm status ${envelope.job_id || '12'} --wait`);
    else if (paras.length <= 160) lines.unshift(`  kcm emit ${jobType} --paras '${paras}'`);
  } catch {
    // An unreadable fixture only loses the example.
  }
  return lines;
}

/** Help for one job type: mode, summary, each para required/optional with its rule, notes, examples. */
export function jobHelp(sent: string): string {
  const job = describeJob(sent);
  if (!job) return `kcm: "${sent}" is not a known job type; kcm --help lists them.\n`;
  const aliases = job.aliases.length > 0 ? `Also accepted as: ${job.aliases.join(', ')}.` : '';
  const mode =
    job.mode === 'async'
      ? 'Mode: async. The reply carries a job id; follow it with kcm status <id> --wait, or send with --wait.'
      : 'Mode: sync. The reply carries the answer.';
  return [
    `${job.jobType}: ${job.summary}`,
    mode,
    `Role: ${REQUIRED_ROLE[job.jobType]} or above (the token's role; a lower one gets error 3001 FORBIDDEN).`,
    ...(aliases ? [aliases] : []),
    '',
    job.paras.length > 0 ? 'Paras (all values are JSON strings unless the rule says otherwise):' : 'Paras: none (send {}).',
    ...paraLines(job.paras, '  '),
    ...(job.notes.length > 0 ? ['', 'Rules:', ...job.notes.map((n) => `  - ${n}`)] : []),
    '',
    'Examples:',
    ...fixtureExample(job.jobType),
    '',
  ].join('\n');
}

export function statusHelp(): string {
  return [
    'Usage: kcm status <job_id> [--wait] [--json]',
    '',
    'Shows the state of an async job: started (queued), ongoing (with step k of n and units',
    'done when the job reports them), done (with its result) or failed (with the error).',
    '',
    ...WAIT_HELP,
    '',
    ...CONNECTION_HELP,
    '',
    'Exit code: 0 when done (or still running without --wait), 1 when failed, 4 on --timeout.',
    '',
  ].join('\n');
}

export function getHelp(): string {
  const queries = JOB_TYPES.filter((t) => describeJob(t).mode === 'sync' && t !== 'get_status');
  return [
    "Usage: kcm get <query> [--paras '<json>'] [--json]",
    '',
    'Runs a read-only query and prints the answer as tables. The get_ prefix may be left out.',
    '',
    'Queries:',
    ...queries.flatMap((q) => {
      const job = describeJob(q);
      const paras = job.paras.map((p) => (p.required ? p.name : `[${p.name}]`)).join(' ');
      return [`  ${q.padEnd(24)} ${job.summary}`, ...(paras ? [`  ${''.padEnd(24)} paras: ${paras}`] : [])];
    }),
    '',
    ...CONNECTION_HELP,
    '',
    'Examples:',
    '  kcm get get_cluster_summary',
    `  kcm get cluster_detail --paras '{"cluster_name":"cluster_1700000000_000001"}'`,
    `  kcm get get_variable --paras '{"hostaddr":"127.0.2.1","port":"57001","variable":"innodb_buffer_pool_size"}'`,
    '',
  ].join('\n');
}
