// kcm audit [--since N] [--limit N]: the audit trail (get_audit, admin token).
// kcm audit verify --data-dir <dir>: checks the chain in a copy of a member's data, offline
// (services/manager/src/audit/verify.ts): exit 0 when it holds, 1 naming each broken record.

import { EXIT, UsageError, type CliIo } from '../io';
import { sendJob } from './emit';
import { connect, CONNECTION_OPTIONS, parseFlags, writeJson } from './shared';

const HELP = [
  'kcm audit [--since <seq>] [--limit <n>]     list the audit trail (get_audit; needs an admin token)',
  'kcm audit verify --data-dir <dir> [--json]  check the hash chain in a copy of a member\'s data directory',
  '',
  'Every accepted mutating request is one record: who (token name, role), what (job type,',
  'paras with secrets redacted), when (the leader\'s clock), from where (client address and',
  'the member that received it), chained by hash. verify reads the Raft snapshot and log',
  'of a stopped member (or a copy) and names every record that was changed or removed.',
  '',
].join('\n');

export async function auditCommand(args: string[], io: CliIo): Promise<number> {
  if (args[0] === 'verify') return verifyCommand(args.slice(1), io);
  const { values, positionals } = parseFlags(args, { ...CONNECTION_OPTIONS, since: { type: 'string' }, limit: { type: 'string' } }, 'audit');
  if (values.help) {
    io.stdout.write(HELP);
    return EXIT.ok;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected ${positionals.join(' ')}`, 'kcm audit --help');
  const paras: Record<string, string> = {};
  if (values.since !== undefined) paras.since = values.since;
  if (values.limit !== undefined) paras.limit = values.limit;
  return sendJob(connect(values, io, 'audit'), io, { jobType: 'get_audit', paras });
}

async function verifyCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parseFlags(args, { 'data-dir': { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, 'audit');
  if (values.help) {
    io.stdout.write(HELP);
    return EXIT.ok;
  }
  const dataDir = values['data-dir'];
  if (!dataDir) throw new UsageError('audit verify needs --data-dir <copy of a member\'s data directory>', 'kcm audit --help');
  // Loaded only here: the rest of kcm does not need the manager's storage code.
  const { verifyAuditTrail } = await import('../../../manager/src/audit/verify');
  const report = await verifyAuditTrail(dataDir);
  if (values.json) writeJson(io, report);
  else if (report.ok) {
    io.stdout.write(`audit chain OK: ${report.snapshotRecords} record(s) in the snapshot, ${report.logRecords} in the log after it; tip ${report.tip.seq} ${report.tip.hash}\n`);
  } else {
    io.stderr.write(`kcm: audit chain BROKEN in ${dataDir}:\n${report.problems.map((p) => `  ${p}`).join('\n')}\n`);
  }
  return report.ok ? EXIT.ok : EXIT.failed;
}
