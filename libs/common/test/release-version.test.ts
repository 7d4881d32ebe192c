// One release version: KCM_VERSION (kcm-protocol.ts) is what --version, get_meta_mode,
// /metrics and the console show and what the Debian packages are named after
// (scripts/release/build-packages.ts). Every package.json states the same, so npm's view of
// the workspace cannot drift from it.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { KCM_VERSION } from '../src/kcm-protocol';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const manifest = (file: string) => JSON.parse(readFileSync(path.join(REPO_ROOT, file), 'utf8')) as { version?: string; workspaces?: string[] };

/** The root package.json and each workspace's (its "workspaces" are `<folder>/*` globs). */
const MANIFESTS = [
  'package.json',
  ...(manifest('package.json').workspaces ?? []).flatMap((glob) => {
    const folder = glob.replace(/\/\*$/, '');
    return readdirSync(path.join(REPO_ROOT, folder))
      .map((name) => `${folder}/${name}/package.json`)
      .filter((file) => existsSync(path.join(REPO_ROOT, file)));
  }),
];

describe('the release version', () => {
  it('is a plain x.y.z, fit for a Debian version', () => {
    expect(KCM_VERSION).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('every workspace package.json states KCM_VERSION', () => {
    expect(MANIFESTS).toContain('services/manager/package.json');
    const versions = Object.fromEntries(MANIFESTS.map((file) => [file, manifest(file).version]));
    expect(versions).toEqual(Object.fromEntries(MANIFESTS.map((file) => [file, KCM_VERSION])));
  });
});
