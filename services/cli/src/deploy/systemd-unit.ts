// Reads a systemd unit file the way systemd does for the few settings `kcm deploy`'s
// local-root transport needs to start a daemon "as its unit's ExecStart would": the
// command line comes from the installed unit, not from a copy of it here, so a package
// whose unit changes is started the new way without this code changing.
//
// Covered: [Service] ExecStart (one line; a leading '-', '@', '+', '!' or ':' prefix is
// refused rather than half-honoured), EnvironmentFile (with '-' = optional), Environment,
// WorkingDirectory; specifiers %i (instance), %n (unit name), %% ; ${VAR} and $VAR from the
// environment; double- and single-quoted words. Not covered (refused or ignored, see
// below): User=/Group= (the caller runs the daemon as itself and says so).

export interface UnitFile {
  /** Settings of each section, in file order; a repeated key keeps every value. */
  sections: Map<string, Array<[string, string]>>;
}

export class UnitFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnitFileError';
  }
}

export function parseUnitFile(text: string): UnitFile {
  const sections = new Map<string, Array<[string, string]>>();
  let current: Array<[string, string]> | undefined;
  // Backslash-newline continues a line (systemd.syntax(7)).
  const lines = text.replace(/\\\n/g, ' ').split('\n');
  for (const raw of lines) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[([^\]]+)\]$/.exec(line);
    if (header) {
      current = sections.get(header[1]) ?? [];
      sections.set(header[1], current);
      continue;
    }
    const eq = line.indexOf('=');
    if (eq <= 0 || current === undefined) continue;
    current.push([line.slice(0, eq).trim(), line.slice(eq + 1).trim()]);
  }
  return { sections };
}

export function unitValues(unit: UnitFile, section: string, key: string): string[] {
  return (unit.sections.get(section) ?? []).filter(([k]) => k === key).map(([, v]) => v);
}

/** %i, %n and %% (systemd.unit(5) "Specifiers"); any other specifier is refused, not guessed. */
export function expandSpecifiers(value: string, names: { instance: string; unitName: string }): string {
  return value.replace(/%(.)/g, (_, c: string) => {
    if (c === 'i' || c === 'I') return names.instance;
    if (c === 'n') return names.unitName;
    if (c === '%') return '%';
    throw new UnitFileError(`specifier %${c} in "${value}" is not supported by the local-root transport`);
  });
}

/** KEY=value lines of an EnvironmentFile (quotes around the value removed, comments skipped). */
export function parseEnvironmentFile(text: string): Map<string, string> {
  const env = new Map<string, string>();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    let value = line.slice(eq + 1).trim();
    if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.endsWith(value[0])) value = value.slice(1, -1);
    env.set(line.slice(0, eq).trim(), value);
  }
  return env;
}

/**
 * Splits an ExecStart command line into words as systemd does: whitespace separates, quotes
 * group, `${VAR}` inside a word is replaced by its value, and a word that is exactly `$VAR`
 * is split on whitespace into several words. An unset variable is an error naming it.
 */
export function splitCommandLine(line: string, env: ReadonlyMap<string, string>): string[] {
  const words: string[] = [];
  const lookup = (name: string): string => {
    const value = env.get(name);
    if (value === undefined) throw new UnitFileError(`ExecStart uses \${${name}}, which neither EnvironmentFile nor Environment sets`);
    return value;
  };
  const re = /"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g;
  for (const match of line.matchAll(re)) {
    const [, dq, sq, bare] = match;
    if (bare !== undefined && /^\$[A-Za-z_][A-Za-z0-9_]*$/.test(bare)) {
      words.push(...lookup(bare.slice(1)).split(/\s+/).filter((w) => w !== ''));
      continue;
    }
    const word = dq ?? sq ?? bare;
    words.push(sq !== undefined ? word : word.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => lookup(name)));
  }
  return words;
}

export interface ServiceCommand {
  argv: string[];
  /** The unit's Environment= and EnvironmentFile= variables, given to the daemon. */
  env: Map<string, string>;
  workingDirectory?: string;
  /** The unit's User= (the caller decides what to do about it). */
  user?: string;
}

export interface ServiceCommandInput {
  unit: UnitFile;
  unitName: string;
  instance?: string;
  /** Reads an EnvironmentFile the unit names (the path as written, after specifiers); undefined = missing. */
  readEnvironmentFile(file: string): string | undefined;
}

/** The command a unit's [Service] runs, with its environment, as systemd would assemble them. */
export function serviceCommand(input: ServiceCommandInput): ServiceCommand {
  const names = { instance: input.instance ?? '', unitName: input.unitName };
  const execStarts = unitValues(input.unit, 'Service', 'ExecStart').filter((v) => v !== '');
  if (execStarts.length !== 1) throw new UnitFileError(`${input.unitName}: expected one ExecStart in [Service], found ${execStarts.length}`);
  const line = expandSpecifiers(execStarts[0], names);
  if (/^[-@+!:]/.test(line)) throw new UnitFileError(`${input.unitName}: ExecStart prefix "${line[0]}" is not supported by the local-root transport`);
  const env = new Map<string, string>();
  for (const value of unitValues(input.unit, 'Service', 'Environment')) {
    for (const [k, v] of parseEnvironmentFile(splitCommandLine(expandSpecifiers(value, names), new Map()).join('\n'))) env.set(k, v);
  }
  for (const value of unitValues(input.unit, 'Service', 'EnvironmentFile')) {
    const optional = value.startsWith('-');
    const file = expandSpecifiers(optional ? value.slice(1) : value, names);
    const text = input.readEnvironmentFile(file);
    if (text === undefined) {
      if (optional) continue;
      throw new UnitFileError(`${input.unitName}: EnvironmentFile ${file} is missing`);
    }
    for (const [k, v] of parseEnvironmentFile(text)) env.set(k, v);
  }
  const argv = splitCommandLine(line, env);
  const workingDirectory = unitValues(input.unit, 'Service', 'WorkingDirectory').at(-1);
  const user = unitValues(input.unit, 'Service', 'User').at(-1);
  return { argv, env, workingDirectory: workingDirectory === undefined ? undefined : expandSpecifiers(workingDirectory.replace(/^-/, ''), names), user };
}
