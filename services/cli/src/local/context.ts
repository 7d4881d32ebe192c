// What every `kcm local` subcommand works with besides its flags.

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CliIo } from '../io';

export interface LocalContext {
  io: CliIo;
  /** Where relative paths are shown from. */
  cwd: string;
  /** The repository whose services are started (node_modules/tsx and services/*). */
  repoRoot: string;
  /** `.kcm/local` in the repository (gitignored): the deployment when --dir is not given. */
  defaultDir: string;
  /** The node binary that runs the services. */
  nodePath: string;
}

export const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url)).replace(/\/$/, '');

/** The default deployment directory: `.kcm/local` in the repository. */
export function localDeploymentDir(): string {
  return path.join(REPO_ROOT, '.kcm', 'local');
}

export function localContext(io: CliIo): LocalContext {
  return { io, cwd: process.cwd(), repoRoot: REPO_ROOT, defaultDir: localDeploymentDir(), nodePath: process.execPath };
}
