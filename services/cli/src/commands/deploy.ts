// kcm deploy | display | scale-out | member replace: a real deployment from one topology
// file (docs/install.md). This file reads the command line; the work is in ../deploy/.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { EXIT, UsageError, type CliIo } from '../io';
import { parseFlags, secondsFlag, writeJson } from './shared';
import { readTopologyFile, loadDeployment } from '../deploy/deployment';
import { runDeploy, stopDeployment } from '../deploy/deploy';
import { displayLines, measureDeployment } from '../deploy/display';
import { deployDirFiles } from '../deploy/credentials';
import { TopologyFileError } from '../deploy/topology-file';
import { PackageError } from '../deploy/package-units';
import { UnitFileError } from '../deploy/systemd-unit';
import { addAgentToTopologyFile } from '../deploy/scale-out';
import { replaceMember } from '../deploy/member-replace';

export function deployHelp(): string {
  return [
    'Usage: kcm deploy <topology.yaml> [--timeout S] [--stop]',
    '       kcm display <topology.yaml> [--json]',
    '       kcm scale-out <topology.yaml> [--agent "<YAML mapping of the new agent>"]',
    '       kcm member replace <old host:port> <new host[:port]> --topology <topology.yaml>',
    '',
    'deploy     makes (once, in global.deploy_dir) the CA, each host\'s certificate, the secrets key and',
    '           the admin token; installs the packages on every host, writes /etc/kcm, starts the units,',
    '           waits for a leader, registers each agent\'s machines and writes the CLI context',
    '           (HTTPS endpoints, CA, token file). Re-runnable: what is installed and running is left',
    '           alone, and a config that differs from the topology is reported, not applied.',
    '           --stop stops every daemon of the topology (database instances keep running).',
    'display    the deployment as measured now: managers (reachable, role, release), agents (reachable,',
    '           registered machine types, instances online).',
    'scale-out  adds the --agent entry to the file (checked like the rest of it) and deploys that host;',
    '           without --agent, deploys the hosts of the file not installed yet.',
    'member replace  removes a dead manager from the group (raft_mission remove_peer), installs the',
    '           topology\'s manager entry for <new> (join: true) and adds it (add_peer).',
    '',
    'Topology keys: docs/install.md. Errors name the key, e.g. "agents[1].cores: is required".',
    '',
  ].join('\n');
}

const OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  json: { type: 'boolean' },
  timeout: { type: 'string' },
  stop: { type: 'boolean' },
  agent: { type: 'string' },
  topology: { type: 'string' },
} as const;

function say(io: CliIo, json: boolean): (line: string) => void {
  return (line) => (json ? io.stderr : io.stdout).write(`${line}\n`);
}

/** Topology, package and unit errors are the operator's to fix: one line, exit 1, never a stack. */
async function reportingInputErrors(io: CliIo, work: () => Promise<number>): Promise<number> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof TopologyFileError || err instanceof PackageError || err instanceof UnitFileError) {
      io.stderr.write(`kcm: ${err.message}\n`);
      return EXIT.failed;
    }
    throw err;
  }
}

function oneTopology(positionals: string[], command: string): string {
  if (positionals.length !== 1) throw new UsageError(`${command} takes one topology file, got ${positionals.length === 0 ? 'none' : positionals.join(' ')}`, `kcm ${command} --help`);
  return path.resolve(positionals[0]);
}

export async function deployCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(args, OPTIONS, 'deploy');
  if (values.help) return (io.stdout.write(deployHelp()), EXIT.ok);
  const file = oneTopology(positionals, 'deploy');
  const json = values.json === true;
  return reportingInputErrors(io, async () => {
    if (values.stop) {
      await stopDeployment(await loadDeployment(file), say(io, json));
      return EXIT.ok;
    }
    const result = await runDeploy({ topologyFile: file, timeoutMs: secondsFlag(values.timeout, 'timeout', 120_000, 'deploy'), say: say(io, json), contextFile: io.env.KCM_CONFIG || undefined });
    if (json) writeJson(io, { ok: result.ok, hosts: result.hosts, leader: result.leader?.leader, machines: result.machines, context: result.context, problem: result.problem });
    if (!result.ok) io.stderr.write(`kcm: deploy: ${result.problem}\n`);
    return result.ok ? EXIT.ok : EXIT.failed;
  });
}

export async function displayCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(args, OPTIONS, 'display');
  if (values.help) return (io.stdout.write(deployHelp()), EXIT.ok);
  const file = oneTopology(positionals, 'display');
  return reportingInputErrors(io, async () => {
    const topology = readTopologyFile(file);
    const files = deployDirFiles(topology.global.deploy_dir);
    const read = (f: string) => {
      try {
        return readFileSync(f);
      } catch {
        return undefined;
      }
    };
    const state = await measureDeployment(topology, { token: read(files.adminToken)?.toString().trim(), ca: read(files.caPem) });
    if (values.json === true) writeJson(io, state);
    else io.stdout.write(`${displayLines(topology, state).join('\n')}\n`);
    const healthy = state.leader !== undefined && state.managers.every((m) => m.reachable) && state.agents.every((a) => a.reachable && a.registered.length > 0);
    return healthy ? EXIT.ok : EXIT.failed;
  });
}

export async function scaleOutCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(args, OPTIONS, 'scale-out');
  if (values.help) return (io.stdout.write(deployHelp()), EXIT.ok);
  const file = oneTopology(positionals, 'scale-out');
  const json = values.json === true;
  return reportingInputErrors(io, async () => {
    let hosts: Set<string> | undefined;
    if (values.agent !== undefined) {
      const host = addAgentToTopologyFile(file, values.agent);
      say(io, json)(`added agent ${host} to ${file}`);
      hosts = new Set([host]);
    }
    const result = await runDeploy({ topologyFile: file, hosts, timeoutMs: secondsFlag(values.timeout, 'timeout', 120_000, 'scale-out'), say: say(io, json), contextFile: io.env.KCM_CONFIG || undefined });
    if (!result.ok) io.stderr.write(`kcm: scale-out: ${result.problem}\n`);
    return result.ok ? EXIT.ok : EXIT.failed;
  });
}

export async function memberCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(args, OPTIONS, 'member');
  if (values.help) return (io.stdout.write(deployHelp()), EXIT.ok);
  const [sub, oldMember, newHost, ...extra] = positionals;
  if (sub !== 'replace' || oldMember === undefined || newHost === undefined || extra.length > 0) {
    throw new UsageError('usage: kcm member replace <old host:port> <new host[:port]> --topology <topology.yaml>', 'kcm member --help');
  }
  if (values.topology === undefined) throw new UsageError('member replace needs --topology <topology.yaml> (the new manager\'s entry and the deployment\'s CA and token)', 'kcm member --help');
  const file = path.resolve(values.topology);
  return reportingInputErrors(io, async () => {
    const problem = await replaceMember({ topologyFile: file, oldMember, newHost, timeoutMs: secondsFlag(values.timeout, 'timeout', 120_000, 'member'), say: say(io, values.json === true) });
    if (problem !== undefined) io.stderr.write(`kcm: member replace: ${problem}\n`);
    return problem === undefined ? EXIT.ok : EXIT.failed;
  });
}
