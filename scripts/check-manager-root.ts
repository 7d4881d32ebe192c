// Fails when services/manager/src's root holds a file beside the few that wire one member
// together: every other file belongs to the folder whose neighbours do the same kind of
// work (leader/, submit/, group/, meta/, jobs/, ...). README's Layout section names the
// folders and says why each of these five stays in the root.
//
//   npx tsx scripts/check-manager-root.ts

import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

/** build() wiring, the listener, the config schema, the member's own metrics, the public surface. */
export const MANAGER_ROOT_FILES: readonly string[] = ['app.ts', 'main.ts', 'config.ts', 'metrics.ts', 'index.ts'];

function main(): void {
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
  const src = path.join(root, 'services/manager/src');
  const strays = readdirSync(src).filter((name) => statSync(path.join(src, name)).isFile() && !MANAGER_ROOT_FILES.includes(name));
  for (const name of strays) console.log(`services/manager/src/${name}: not one of ${MANAGER_ROOT_FILES.join(', ')}; move it into the folder that does its kind of work`);
  console.log(`services/manager/src root: ${strays.length} file(s) outside ${MANAGER_ROOT_FILES.join(', ')}`);
  if (strays.length > 0) process.exitCode = 1;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) main();
