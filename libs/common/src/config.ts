// Reading configuration from the environment with one error style: a bad value names the
// variable, the rule and the value, and fails at start-up rather than at first use.

export type Env = Readonly<Record<string, string | undefined>>;

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** The variable's value, or `fallback` when it is unset or empty. */
export function envString(env: Env, name: string, fallback: string): string;
export function envString(env: Env, name: string): string | undefined;
export function envString(env: Env, name: string, fallback?: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? fallback : value;
}

/** An integer within [min, max]; unset or empty gives `fallback`. */
export function envInt(env: Env, name: string, fallback: number, range: { min?: number; max?: number } = {}): number {
  const raw = envString(env, name);
  if (raw === undefined) return fallback;
  if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(`${name}: must be an integer, got "${raw}"`);
  const value = Number(raw.trim());
  if (range.min !== undefined && value < range.min) throw new ConfigError(`${name}: must be >= ${range.min}, got "${raw}"`);
  if (range.max !== undefined && value > range.max) throw new ConfigError(`${name}: must be <= ${range.max}, got "${raw}"`);
  return value;
}

/** A comma-separated list with blanks dropped (e.g. KCM_TOKENS="a,b"). */
export function envList(env: Env, name: string): string[] {
  return (envString(env, name) ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

/** True for a host name or address that only this machine can reach (127.0.0.0/8, ::1, localhost). */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  return bare === 'localhost' || bare === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(bare);
}
