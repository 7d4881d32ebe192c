// The command lines of kcm-manager and kcm-agent: flags (with an environment variable behind
// each where a unit's env file sets it), --help and --version, and one shape for every
// mistake in them. An operator who mistypes a flag or a variable gets one line naming it and
// exit 2, never node:util's ERR_PARSE_ARGS_* stack trace, and a misspelt KCM_AGENT_* variable
// is named rather than silently ignored.
//
// parseCommandLine() decides and does no I/O, so it is unit tested; runCommandLine() is the
// process edge: it prints and exits.

import { parseArgs } from 'node:util';
import { KCM_PROTOCOL, KCM_VERSION } from './kcm-protocol';

/** Exit codes: 2 for a command line that cannot be used (as the CLI's EXIT.usage), 1 for a configuration that fails. */
export const EXIT_USAGE = 2;
export const EXIT_CONFIG = 1;

export interface OptionSpec {
  type: 'string' | 'boolean';
  /** The value's placeholder in --help, e.g. `<file.json>`. */
  value?: string;
  /** The environment variable used when the flag is not given. A boolean's variable is `1` or `0`. */
  env?: string;
  default?: string;
  help: string;
  /** Checks a string value; returns what is wrong with it ("must be ..."), or undefined. */
  check?: (value: string) => string | undefined;
}

export interface CommandSpec {
  program: string;
  /** What the program is, one line. */
  summary: string;
  /** The usage line after the program name, e.g. `--config <file.json> [--insecure]`. */
  synopsis: string;
  options: Record<string, OptionSpec>;
  /** Every environment variable with this prefix must be one of the options' `env`. */
  envPrefix?: string;
  /** Lines after the options in --help. */
  notes?: string[];
}

export type OptionValues = Record<string, string | boolean | undefined>;

export type CommandLineOutcome =
  | { kind: 'run'; values: OptionValues }
  | { kind: 'exit'; code: number; stream: 'stdout' | 'stderr'; text: string };

/** `kcm-manager 0.2.0 (kcm-protocol 2)`: what --version prints, for every kcm program. */
export function versionLine(program: string): string {
  return `${program} ${KCM_VERSION} (kcm-protocol ${KCM_PROTOCOL})`;
}

export function helpText(spec: CommandSpec): string {
  const rows: [string, string][] = Object.entries(spec.options).map(([name, o]) => [
    `--${name}${o.value ? ` ${o.value}` : ''}`,
    `${o.help}${o.env ? ` (env ${o.env})` : ''}${o.default !== undefined ? ` [default ${o.default}]` : ''}`,
  ]);
  rows.push(['--help', 'print this help and exit'], ['--version', 'print the version and exit']);
  const width = Math.max(...rows.map(([flag]) => flag.length)) + 2;
  return [
    `${spec.program}: ${spec.summary}`,
    '',
    `usage: ${spec.program} ${spec.synopsis}`,
    '',
    ...rows.map(([flag, text]) => `  ${flag.padEnd(width)}${text}`),
    ...(spec.notes ? ['', ...spec.notes] : []),
    '',
  ].join('\n');
}

class CommandLineError extends Error {}

/** node:util parseArgs's errors in a few words, naming the flag. */
function parseArgsProblem(err: unknown, program: string): string {
  const code = (err as { code?: string }).code;
  const message = err instanceof Error ? err.message : String(err);
  const flag = /'(-[^' ]+)/.exec(message)?.[1] ?? '';
  switch (code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown flag ${flag}; see ${program} --help`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return /argument missing/.test(message) ? `${flag} needs a value` : `${flag} takes no value`;
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument ${/'([^']*)'/.exec(message)?.[1] ?? ''}; see ${program} --help`;
    default:
      return message.split('\n')[0];
  }
}

function booleanFromEnv(variable: string, raw: string): boolean {
  if (raw === '1' || raw === 'true') return true;
  if (raw === '0' || raw === 'false' || raw === '') return false;
  throw new CommandLineError(`${variable}: must be 1 or 0, got ${JSON.stringify(raw)}`);
}

/**
 * Reads argv (without node and the script) and env against the spec: --help and --version
 * win over everything else; a flag overrides its variable, which overrides the default.
 */
export function parseCommandLine(spec: CommandSpec, argv: readonly string[], env: Readonly<Record<string, string | undefined>>): CommandLineOutcome {
  const fail = (problem: string): CommandLineOutcome => ({ kind: 'exit', code: EXIT_USAGE, stream: 'stderr', text: `${spec.program}: ${problem}\n` });
  if (argv.includes('--help') || argv.includes('-h')) return { kind: 'exit', code: 0, stream: 'stdout', text: helpText(spec) };
  if (argv.includes('--version')) return { kind: 'exit', code: 0, stream: 'stdout', text: `${versionLine(spec.program)}\n` };

  const options = Object.fromEntries(Object.entries(spec.options).map(([name, o]) => [name, { type: o.type }]));
  let parsed: OptionValues;
  try {
    parsed = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }).values as OptionValues;
  } catch (err) {
    return fail(parseArgsProblem(err, spec.program));
  }

  try {
    if (spec.envPrefix) {
      const known = new Set(Object.values(spec.options).flatMap((o) => (o.env ? [o.env] : [])));
      const unknown = Object.keys(env).filter((name) => name.startsWith(spec.envPrefix!) && !known.has(name)).sort();
      if (unknown.length > 0) throw new CommandLineError(`unknown environment variable ${unknown.join(', ')}; known: ${[...known].sort().join(', ')}`);
    }
    const values: OptionValues = Object.create(null) as OptionValues;
    for (const [name, o] of Object.entries(spec.options)) {
      const fromFlag = parsed[name];
      const fromEnv = o.env !== undefined && env[o.env] !== undefined && env[o.env] !== '' ? env[o.env] : undefined;
      if (o.type === 'boolean') {
        values[name] = fromFlag === true || (fromEnv !== undefined && booleanFromEnv(o.env!, fromEnv));
        continue;
      }
      const source = fromFlag !== undefined ? `--${name}` : fromEnv !== undefined ? o.env! : undefined;
      const value = (fromFlag as string | undefined) ?? fromEnv ?? o.default;
      if (value !== undefined && o.check) {
        const problem = o.check(value);
        if (problem) throw new CommandLineError(`${source ?? `--${name} default`}: ${problem}, got ${JSON.stringify(value)}`);
      }
      values[name] = value;
    }
    return { kind: 'run', values };
  } catch (err) {
    if (err instanceof CommandLineError) return fail(err.message);
    throw err;
  }
}

/** The process edge of parseCommandLine: prints --help, --version or the problem and exits, or returns the values. */
export function runCommandLine(spec: CommandSpec): OptionValues {
  const outcome = parseCommandLine(spec, process.argv.slice(2), process.env);
  if (outcome.kind === 'run') return outcome.values;
  (outcome.stream === 'stdout' ? process.stdout : process.stderr).write(outcome.text);
  process.exit(outcome.code);
}

/** A failure while starting from a configuration: `<program>: <what>` on one line, exit 1. */
export function exitWithConfigError(program: string, err: unknown): never {
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`${program}: ${message.replace(/\s*\n\s*/g, '; ')}\n`);
  process.exit(EXIT_CONFIG);
}

/** For OptionSpec.check: a TCP port. */
export function checkPort(value: string): string | undefined {
  return /^\d{1,5}$/.test(value) && Number(value) >= 1 && Number(value) <= 65535 ? undefined : 'must be a port number (1-65535)';
}
