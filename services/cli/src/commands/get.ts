// kcm get <query> [--paras '<json>']: the sync queries, printed as tables.

import { JOB_MODES, JOB_TYPES, canonicalJobType, type JobType } from '@kcm/protocol';
import { EXIT, UsageError, type CliIo } from '../io';
import { getHelp, jobHelp } from '../help';
import { sendJob, parasFlag } from './emit';
import { connect, CONNECTION_OPTIONS, parseFlags } from './shared';

/** Sync jobs other than get_status: what `kcm get` answers. */
export const QUERY_TYPES: readonly JobType[] = JOB_TYPES.filter((t) => JOB_MODES[t] === 'sync' && t !== 'get_status');

/** `cluster_summary` is accepted for `get_cluster_summary`; aliases (get_meta_summary) too. */
export function queryNamed(name: string): { sent: string; jobType: JobType } | undefined {
  for (const sent of [name, `get_${name}`]) {
    const jobType = canonicalJobType(sent);
    if (jobType !== undefined && QUERY_TYPES.includes(jobType)) return { sent, jobType };
  }
  return undefined;
}

export async function getCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(args, { ...CONNECTION_OPTIONS, paras: { type: 'string', short: 'p' } }, 'get');
  if (values.help) {
    io.stdout.write(positionals[0] ? jobHelp(positionals[0]) : getHelp());
    return EXIT.ok;
  }
  if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? 'get needs a query name' : `get takes one query, got ${positionals.join(' ')}`, 'kcm get --help');
  const query = queryNamed(positionals[0]);
  if (!query) {
    const mode = canonicalJobType(positionals[0]) ? ` is not a query (use kcm emit ${positionals[0]})` : ' is not a query';
    throw new UsageError(`"${positionals[0]}"${mode}; queries: ${QUERY_TYPES.join(', ')}`, 'kcm get --help');
  }
  const connection = connect(values, io, 'get');
  return sendJob(connection, io, { jobType: query.sent, paras: parasFlag(values.paras, 'get') });
}
