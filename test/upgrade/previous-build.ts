// The previous kcm build (commit 18f544a, kcm protocol 1: it states no protocol version) as a
// checkout of its own, for the tests that mix it with this build (mixed-version.test.ts).
// Made once and reused: node_modules/.cache/kcm-previous/<commit>/ holds `git archive` of that
// commit, with a node_modules of its own whose @kcm/* packages are that checkout's. The
// third-party packages are this checkout's, linked, when both lock files pin the same ones
// (the fast path: no download, no install); otherwise `npm ci` from the local npm cache
// installs them. If neither works the test fails saying why: it never skips silently.

import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../manager/helpers/processes';

/** The build this one upgrades from (issue 31: "the previous version"). */
export const PREVIOUS_COMMIT = '18f544a';

export interface PreviousBuild {
  /** The checkout's root: ManagedProcess.root for its processes. */
  root: string;
  commit: string;
  /** How its third-party packages were provided. */
  packages: 'linked' | 'npm ci';
}

const MARKER = '.kcm-previous-build.json';

function git(...args: string[]): string {
  return execFileSync('git', ['-C', REPO_ROOT, ...args], { encoding: 'utf8' }).trim();
}

/** The lock file's third-party packages (workspace entries left out: each checkout links its own). */
function thirdPartyPackages(lockJson: string): string {
  const lock = JSON.parse(lockJson) as { packages?: Record<string, unknown> };
  const entries = Object.entries(lock.packages ?? {}).filter(([key]) => key.startsWith('node_modules/') && !key.startsWith('node_modules/@kcm/'));
  return JSON.stringify(entries.sort(([a], [b]) => a.localeCompare(b)));
}

/** node_modules of `root`: this checkout's third-party packages linked, @kcm/* pointing into `root`. */
function linkPackages(root: string): void {
  const own = path.join(REPO_ROOT, 'node_modules');
  const target = path.join(root, 'node_modules');
  mkdirSync(path.join(target, '@kcm'), { recursive: true });
  for (const name of readdirSync(own)) {
    if (name === '@kcm' || name === '.cache' || name === '.package-lock.json') continue;
    symlinkSync(path.join(own, name), path.join(target, name));
  }
  // The workspaces of that commit, as npm links them: node_modules/@kcm/<dir name> -> its folder.
  for (const group of ['libs', 'services']) {
    for (const dir of readdirSync(path.join(root, group))) {
      const manifest = path.join(root, group, dir, 'package.json');
      if (!existsSync(manifest)) continue;
      const name = (JSON.parse(readFileSync(manifest, 'utf8')) as { name: string }).name;
      if (!name.startsWith('@kcm/')) continue;
      symlinkSync(path.join('..', '..', group, dir), path.join(target, name));
    }
  }
}

/** Makes (or finds made) the previous build's checkout. Throws, saying why, when it cannot. */
export function previousBuild(commit = PREVIOUS_COMMIT): PreviousBuild {
  const sha = git('rev-parse', '--verify', `${commit}^{commit}`);
  const cacheDir = path.join(REPO_ROOT, 'node_modules', '.cache', 'kcm-previous');
  const root = path.join(cacheDir, sha);
  const marker = path.join(root, MARKER);
  if (existsSync(marker)) return JSON.parse(readFileSync(marker, 'utf8')) as PreviousBuild;

  mkdirSync(cacheDir, { recursive: true });
  const work = `${root}.making-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work);
  try {
    const archive = spawnSync('bash', ['-c', `git -C "$1" archive "$2" | tar -x -C "$3"`, 'archive', REPO_ROOT, sha, work], { encoding: 'utf8' });
    if (archive.status !== 0) throw new Error(`git archive ${sha} | tar -x failed: ${archive.stderr}`);
    let packages: PreviousBuild['packages'];
    const theirs = readFileSync(path.join(work, 'package-lock.json'), 'utf8');
    const ours = readFileSync(path.join(REPO_ROOT, 'package-lock.json'), 'utf8');
    if (thirdPartyPackages(theirs) === thirdPartyPackages(ours)) {
      linkPackages(work);
      packages = 'linked';
    } else {
      const install = spawnSync('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: work, encoding: 'utf8', timeout: 600_000 });
      if (install.status !== 0) {
        throw new Error(`npm ci in the previous build (${sha}) failed (status ${install.status}${install.error ? `, ${install.error.message}` : ''}): ${install.stderr.slice(-2000)}`);
      }
      packages = 'npm ci';
    }
    const build: PreviousBuild = { root, commit: sha, packages };
    writeFileSync(path.join(work, MARKER), JSON.stringify(build));
    rmSync(root, { recursive: true, force: true });
    renameSync(work, root);
    return build;
  } catch (err) {
    rmSync(work, { recursive: true, force: true });
    throw new Error(`cannot make the previous kcm build (${commit}) to test against: ${(err as Error).message}`, { cause: err });
  }
}
