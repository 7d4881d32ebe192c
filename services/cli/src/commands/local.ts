// kcm local up|status|down: a manager group and agents on loopback addresses, one process
// each (managers on 127.0.1.x, agents on 127.0.2.x). This file reads the command line;
// the work is in ../local/.

import path from 'node:path';
import { EXIT, UsageError, type CliIo } from '../io';
import { parseFlags, secondsFlag } from './shared';
import { localContext, type LocalContext } from '../local/context';
import { DEFAULT_TOPOLOGY, TopologyError } from '../local/topology';
import { RecordError } from '../local/record';
import { localUp } from '../local/up';
import { localStatus } from '../local/status';
import { localDown } from '../local/down';

export const LOCAL_SUBCOMMANDS = ['up', 'down', 'status'] as const;

export function localHelp(): string {
  const d = DEFAULT_TOPOLOGY;
  return [
    'Usage: kcm local <up|status|down> [options]',
    '  kcm local up [--managers N] [--hosts N] [--dir D] [--json]',
    '  kcm local status [--dir D] [--json]',
    '  kcm local down [--dir D] [--purge] [--json]',
    '',
    `Runs kcm on loopback addresses: managers on ${d.managerNet}.x (HTTPS :${d.httpPort}, Raft :${d.httpPort + 1}),`,
    `agents on ${d.agentNet}.x (:${d.agentPort}), each a separate detached process. Configs, data, logs and`,
    'the record of what runs (local.json, with every pid) live under D, default .kcm/local in the repository.',
    '',
    '  up       start the group and the agents, wait until a leader is elected, print the endpoints',
    '           and a first request to try. If D already runs, only prints its endpoints. A stopped',
    '           D is started again on its existing data, and the agents bring the database instances',
    '           back. If only part of D runs (a manager crashed), starts just what is not running.',
    '  status   each process alive or not, each manager\'s get_meta_mode answer, running instances;',
    '           exit 0 only when everything runs and the group has a leader',
    '  down     SIGTERM each recorded pid (SIGKILL after --grace), managers, then agents, then the',
    '           database instances whose pid files (*.pid, postmaster.pid) are under D or named by',
    '           the agents\' registries. A pid is signalled only while /proc/<pid>/cmdline still',
    '           shows the process kcm started. Files are kept unless --purge, which also removes',
    '           the instances\' cgroups.',
    '',
    'Options:',
    `  --managers <n>        managers in the Raft group (default ${d.managers})`,
    `  --hosts <n>           agents, one per simulated host (default ${d.hosts})`,
    '  --dir <path>          the deployment directory (default .kcm/local in the repository)',
    '  --json                print the endpoints (up), the state (status) or what stopped (down) as JSON:',
    '                        managers [{member, url, pid, log}], agents [{hostaddr, port, pid, log, machineFile}]',
    '  --timeout <s>         up: how long to wait for a leader (default 60)',
    '  --purge               down: also delete D',
    '  --grace <s>           down: seconds between SIGTERM and SIGKILL (default 10)',
    `  --manager-net <a.b.c> --agent-net <a.b.c> --first <n>   addresses: <net>.<first>, <net>.<first+1>, ...`,
    `                        (defaults ${d.managerNet}, ${d.agentNet}, ${d.first}); tests use their own blocks`,
    `  --http-port <p> --agent-port <p>                       (defaults ${d.httpPort}, ${d.agentPort})`,
    '',
    'Examples:',
    '  kcm local up',
    '  kcm local up --managers 1 --hosts 2 --dir /tmp/kcm-small --json',
    '  kcm local down --purge',
    '',
  ].join('\n');
}

const LOCAL_OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  json: { type: 'boolean' },
  dir: { type: 'string' },
  managers: { type: 'string' },
  hosts: { type: 'string' },
  timeout: { type: 'string' },
  purge: { type: 'boolean' },
  grace: { type: 'string' },
  'manager-net': { type: 'string' },
  'agent-net': { type: 'string' },
  first: { type: 'string' },
  'http-port': { type: 'string' },
  'agent-port': { type: 'string' },
} as const;

const ONLY_FOR: Record<string, (typeof LOCAL_SUBCOMMANDS)[number]> = {
  managers: 'up',
  hosts: 'up',
  timeout: 'up',
  'manager-net': 'up',
  'agent-net': 'up',
  first: 'up',
  'http-port': 'up',
  'agent-port': 'up',
  purge: 'down',
  grace: 'down',
};

function integerFlag(value: string | undefined, flag: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^[0-9]+$/.test(value.trim())) throw new UsageError(`--${flag} must be a whole number, got "${value}"`, 'kcm local --help');
  return Number(value);
}

export async function localCommand(args: string[], io: CliIo, ctx: LocalContext = localContext(io)): Promise<number> {
  const { values, positionals } = parseFlags(args, LOCAL_OPTIONS, 'local');
  if (values.help) {
    io.stdout.write(localHelp());
    return EXIT.ok;
  }
  const [sub, ...extra] = positionals;
  if (sub === undefined) throw new UsageError(`local needs a subcommand: ${LOCAL_SUBCOMMANDS.join(', ')}`, 'kcm local --help');
  if (!(LOCAL_SUBCOMMANDS as readonly string[]).includes(sub)) {
    throw new UsageError(`unknown local subcommand "${sub}"; subcommands: ${LOCAL_SUBCOMMANDS.join(', ')}`, 'kcm local --help');
  }
  if (extra.length > 0) throw new UsageError(`local ${sub} takes no arguments, got ${extra.join(' ')}`, 'kcm local --help');
  for (const [flag, owner] of Object.entries(ONLY_FOR)) {
    if ((values as Record<string, unknown>)[flag] !== undefined && owner !== sub) {
      throw new UsageError(`--${flag} is an option of local ${owner}, not local ${sub}`, 'kcm local --help');
    }
  }
  const dir = values.dir !== undefined ? path.resolve(ctx.cwd, values.dir) : ctx.defaultDir;
  const json = values.json === true;
  try {
    if (sub === 'up') {
      const d = DEFAULT_TOPOLOGY;
      return await localUp(ctx, {
        json,
        timeoutMs: secondsFlag(values.timeout, 'timeout', 60_000, 'local'),
        topology: {
          dir,
          managers: integerFlag(values.managers, 'managers', d.managers),
          hosts: integerFlag(values.hosts, 'hosts', d.hosts),
          managerNet: values['manager-net'] ?? d.managerNet,
          agentNet: values['agent-net'] ?? d.agentNet,
          first: integerFlag(values.first, 'first', d.first),
          httpPort: integerFlag(values['http-port'], 'http-port', d.httpPort),
          agentPort: integerFlag(values['agent-port'], 'agent-port', d.agentPort),
        },
      });
    }
    if (sub === 'status') return await localStatus(ctx, { dir, json });
    return await localDown(ctx, { dir, json, purge: values.purge === true, graceMs: secondsFlag(values.grace, 'grace', 10_000, 'local') });
  } catch (err) {
    if (err instanceof TopologyError) throw new UsageError(err.message, 'kcm local --help');
    if (err instanceof RecordError) {
      io.stderr.write(`kcm: ${err.message}\n`);
      return EXIT.failed;
    }
    throw err;
  }
}
