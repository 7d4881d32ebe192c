// The CLI's context file: named sets of manager endpoints, the CA that signs their HTTPS
// certificates and where the token is kept, so `kcm` reaches a real deployment with no
// flags. `$KCM_CONFIG`, else ~/.config/kcm/config.json, mode 0600:
//
//   { "current": "prod",
//     "contexts": { "prod": { "endpoints": ["https://10.0.0.1:58000", ...],
//                             "ca": "/home/me/.config/kcm/prod-ca.pem", "token_file": "..." } } }
//
// `kcm deploy` and `kcm local up` write it (saveContext); `kcm context use` switches
// `current`. Context names come from a file, so contexts live in a Map, never as keys of
// a plain object. Relative `ca` / `token_file` paths are read from the file's directory.

import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';

export interface KcmContext {
  name: string;
  /** Base URLs of the group's managers (http:// or https://), tried in turn. */
  endpoints: string[];
  /** PEM bundle trusted for the managers' HTTPS certificates (absolute path). */
  caFile?: string;
  /** File holding the bearer token (absolute path). */
  tokenFile?: string;
}

export interface ContextFile {
  current?: string;
  contexts: Map<string, KcmContext>;
}

/** A context file that cannot be used: the message names the file and the field. */
export class ContextFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ContextFileError';
  }
}

/** Context names are shown and typed by people: letters, digits, `.`, `_`, `-`. */
export const CONTEXT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const CONTEXT_NAME_RULE = 'letters, digits, ".", "_" or "-", at most 64, starting with a letter or digit';

/** `$KCM_CONFIG`, else `~/.config/kcm/config.json` (the XDG place; $XDG_CONFIG_HOME when set). */
export function contextFilePath(env: Readonly<Record<string, string | undefined>> = process.env): string {
  if (env.KCM_CONFIG) return env.KCM_CONFIG;
  const configHome = env.XDG_CONFIG_HOME || path.join(env.HOME || homedir(), '.config');
  return path.join(configHome, 'kcm', 'config.json');
}

/** The file's contexts; an empty set when the file does not exist. */
export function readContextFile(file: string = contextFilePath()): ContextFile {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { contexts: new Map() };
    throw new ContextFileError(`${file}: cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ContextFileError(`${file}: not JSON (${(err as Error).message})`);
  }
  return parseContextFile(raw, file);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Checks every field; the first problem is thrown naming the file and the field's path. */
export function parseContextFile(raw: unknown, file: string): ContextFile {
  const bad = (field: string, problem: string) => new ContextFileError(`${file}: ${field}: ${problem}`);
  if (!isRecord(raw)) throw bad('(root)', 'must be an object with "contexts"');
  for (const key of Object.keys(raw)) {
    if (key !== 'current' && key !== 'contexts') throw bad(key, 'unknown field (expected "current" and "contexts")');
  }
  const contexts = new Map<string, KcmContext>();
  const listed = raw.contexts ?? {};
  if (!isRecord(listed)) throw bad('contexts', 'must be an object of named contexts');
  const dir = path.dirname(path.resolve(file));
  for (const [name, entry] of Object.entries(listed)) {
    const at = `contexts.${name}`;
    if (!CONTEXT_NAME_PATTERN.test(name)) throw bad(at, `bad context name: ${CONTEXT_NAME_RULE}`);
    if (!isRecord(entry)) throw bad(at, 'must be an object with "endpoints"');
    for (const key of Object.keys(entry)) {
      if (key !== 'endpoints' && key !== 'ca' && key !== 'token_file') throw bad(`${at}.${key}`, 'unknown field (expected "endpoints", "ca", "token_file")');
    }
    const { endpoints, ca, token_file: tokenFile } = entry;
    if (!Array.isArray(endpoints) || endpoints.length === 0) throw bad(`${at}.endpoints`, 'must be a non-empty list of http:// or https:// URLs');
    endpoints.forEach((endpoint, i) => {
      const problem = endpointProblem(endpoint);
      if (problem) throw bad(`${at}.endpoints[${i}]`, problem);
    });
    if (ca !== undefined && (typeof ca !== 'string' || ca === '')) throw bad(`${at}.ca`, 'must be the path of a PEM file');
    if (tokenFile !== undefined && (typeof tokenFile !== 'string' || tokenFile === '')) throw bad(`${at}.token_file`, 'must be the path of a file holding the token');
    contexts.set(name, {
      name,
      endpoints: (endpoints as string[]).map(trimSlash),
      ...(ca !== undefined ? { caFile: path.resolve(dir, ca as string) } : {}),
      ...(tokenFile !== undefined ? { tokenFile: path.resolve(dir, tokenFile as string) } : {}),
    });
  }
  const current = raw.current;
  if (current !== undefined) {
    if (typeof current !== 'string') throw bad('current', 'must be the name of a context');
    if (!contexts.has(current)) throw bad('current', `names "${current}", which is not in contexts`);
  }
  return { current: current as string | undefined, contexts };
}

function trimSlash(url: string): string {
  return url.trim().replace(/\/+$/, '');
}

/** Why a string is not a manager endpoint, or undefined when it is one. */
export function endpointProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return 'must be an http:// or https:// URL';
  try {
    const url = new URL(value.trim());
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return `must be an http:// or https:// URL, got "${value}"`;
    return undefined;
  } catch {
    return `must be an http:// or https:// URL, got "${value}"`;
  }
}

/**
 * A context by name, else the current one. Undefined when no name is given and there is no
 * current context (or no file); a name that is not in the file is an error naming it.
 */
export function loadContext(name?: string, file: string = contextFilePath()): KcmContext | undefined {
  const { current, contexts } = readContextFile(file);
  const wanted = name ?? current;
  if (wanted === undefined) return undefined;
  const found = contexts.get(wanted);
  if (!found) {
    const known = [...contexts.keys()];
    throw new ContextFileError(`${file}: no context "${wanted}"${known.length > 0 ? ` (contexts: ${known.join(', ')})` : ' (it has none)'}`);
  }
  return found;
}

/**
 * Adds or replaces one context, keeping the others; `makeCurrent` (or a file with no
 * current context yet) makes it current. Written whole to a temporary file and renamed,
 * mode 0600 in a 0700 directory: it names where a token lies and which CA to trust.
 * `caFile` and `tokenFile` are stored as absolute paths.
 */
export function saveContext(
  ctx: { name: string; endpoints: string[]; caFile?: string; tokenFile?: string; makeCurrent?: boolean },
  file: string = contextFilePath(),
): void {
  if (!CONTEXT_NAME_PATTERN.test(ctx.name)) throw new ContextFileError(`context name "${ctx.name}": ${CONTEXT_NAME_RULE}`);
  if (ctx.endpoints.length === 0) throw new ContextFileError(`context ${ctx.name}: endpoints: must be a non-empty list of URLs`);
  ctx.endpoints.forEach((endpoint, i) => {
    const problem = endpointProblem(endpoint);
    if (problem) throw new ContextFileError(`context ${ctx.name}: endpoints[${i}]: ${problem}`);
  });
  const existing = readContextFile(file);
  existing.contexts.set(ctx.name, {
    name: ctx.name,
    endpoints: ctx.endpoints.map(trimSlash),
    ...(ctx.caFile !== undefined ? { caFile: path.resolve(ctx.caFile) } : {}),
    ...(ctx.tokenFile !== undefined ? { tokenFile: path.resolve(ctx.tokenFile) } : {}),
  });
  const current = ctx.makeCurrent || existing.current === undefined ? ctx.name : existing.current;
  writeContextFile({ current, contexts: existing.contexts }, file);
}

/** Makes `name` the current context; an unknown name is an error naming the file. */
export function useContext(name: string, file: string = contextFilePath()): KcmContext {
  const existing = readContextFile(file);
  const found = existing.contexts.get(name);
  if (!found) {
    const known = [...existing.contexts.keys()];
    throw new ContextFileError(`${file}: no context "${name}"${known.length > 0 ? ` (contexts: ${known.join(', ')})` : ' (it has none)'}`);
  }
  writeContextFile({ current: name, contexts: existing.contexts }, file);
  return found;
}

function writeContextFile(content: ContextFile, file: string): void {
  const contexts: Record<string, unknown> = Object.create(null);
  for (const [name, ctx] of content.contexts) {
    contexts[name] = {
      endpoints: ctx.endpoints,
      ...(ctx.caFile !== undefined ? { ca: ctx.caFile } : {}),
      ...(ctx.tokenFile !== undefined ? { token_file: ctx.tokenFile } : {}),
    };
  }
  const text = `${JSON.stringify({ current: content.current, contexts }, null, 2)}\n`;
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, text, { mode: 0o600 });
  chmodSync(temporary, 0o600); // the mode given to writeFileSync is filtered by the umask
  renameSync(temporary, file);
}
