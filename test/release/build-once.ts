// The release packages for tests, built at most once per source state: every test that needs
// the .deb files (packages.test.ts, the deploy test) calls buildPackagesOnce(). vitest runs each
// file in a fresh process, so the cache is a folder named by a hash of everything the build
// reads; a second file in the same run (or a later run on unchanged sources) reuses it.

import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildPackages, PACKAGES, packageFileName, type BuiltPackages } from '../../scripts/release/build-packages';
import { KCM_VERSION } from '../../libs/common/src/kcm-protocol';

export type { BuiltPackages } from '../../scripts/release/build-packages';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** What the build reads: sources, protos, the console, kcm_ddl, units, samples, the build itself and the lock file. */
const INPUTS = ['libs', 'services', 'proto', 'deploy/systemd', 'deploy/config', 'scripts/release', 'scripts/backup-open.mjs', 'package-lock.json'];
const SKIP = /(^|\/)(node_modules|test|\.kcm)(\/|$)|\.(o|so|bc)$|kcm_ddl--1\.0\.sql$/;

function sourceHash(): string {
  const hash = createHash('sha256');
  const add = (rel: string) => {
    const full = path.join(REPO_ROOT, rel);
    if (statSync(full).isDirectory()) {
      for (const name of readdirSync(full).sort()) {
        const child = `${rel}/${name}`;
        if (!SKIP.test(child)) add(child);
      }
    } else {
      hash.update(`${rel}\0`).update(readFileSync(full)).update('\0');
    }
  };
  for (const input of INPUTS) add(input);
  return hash.digest('hex').slice(0, 16);
}

let built: Promise<BuiltPackages> | undefined;

/**
 * The three .deb files for the current sources: built into `<tmpdir>/kcm-packages-<hash>/`
 * unless that folder already holds them (it appears whole, by rename, or not at all).
 */
export function buildPackagesOnce(): Promise<BuiltPackages> {
  built ??= (async () => {
    const dir = path.join(tmpdir(), `kcm-packages-${sourceHash()}`);
    const files = Object.fromEntries(PACKAGES.map((spec) => [spec.name, path.join(dir, packageFileName(spec))])) as BuiltPackages['files'];
    if (Object.values(files).every((file) => existsSync(file))) return { version: KCM_VERSION, files };
    const partial = mkdtempSync(`${dir}.partial-`);
    try {
      await buildPackages(partial);
      rmSync(dir, { recursive: true, force: true });
      renameSync(partial, dir);
    } finally {
      rmSync(partial, { recursive: true, force: true });
    }
    // The packages of earlier source states are not used again: keep only this one.
    for (const name of readdirSync(tmpdir())) {
      if (/^kcm-packages-[0-9a-f]{16}$/.test(name) && path.join(tmpdir(), name) !== dir) rmSync(path.join(tmpdir(), name), { recursive: true, force: true });
    }
    return { version: KCM_VERSION, files };
  })();
  return built;
}
