// Files kcm reads at run time beside its code (the .proto files, the console's pages): one
// place that says where they are. Run from the repository (tsx, tests) they sit at their
// repository paths; in a release bundle (scripts/release/build-packages.ts) every program is
// one file with its assets in folders beside it, /usr/lib/kcm/<role>/{proto,console}/, so a
// path written relative to some source file's import.meta.url would point nowhere.

import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Defined as `true` by the release bundler (esbuild `define`); never set when run from source. */
declare const KCM_RELEASE_BUNDLE: boolean | undefined;

/** Each asset folder: its repository path, and its folder name beside the bundle. */
const ASSET_FOLDERS = {
  proto: 'proto',
  console: 'services/manager/console',
} as const;

export type AssetFolder = keyof typeof ASSET_FOLDERS;

/** True inside a release bundle. */
export function isReleaseBundle(): boolean {
  return typeof KCM_RELEASE_BUNDLE !== 'undefined' && KCM_RELEASE_BUNDLE === true;
}

/**
 * The absolute path of an asset folder, or of a file in it: `assetPath('proto', 'raft.proto')`.
 * In a bundle, import.meta.url is the bundle's own file, so the folder is its sibling.
 */
export function assetPath(folder: AssetFolder, ...file: string[]): string {
  if (isReleaseBundle()) return path.join(path.dirname(fileURLToPath(import.meta.url)), folder, ...file);
  // This file is libs/common/src/assets.ts: the repository root is three folders up.
  const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
  return path.join(repoRoot, ASSET_FOLDERS[folder], ...file);
}
