// The install sequence docs/install.md shows (its "## Install sequence" section's ```sh
// block), read from the file so the system test runs exactly what the README shows; a unit
// test checks that the README's "## Install on real hosts" section holds the same block.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The first ```sh block under `heading` in markdown text, or undefined. */
export function shBlockUnder(markdown: string, heading: string): string | undefined {
  const start = markdown.indexOf(`\n${heading}\n`);
  if (start < 0) return undefined;
  const level = heading.split(' ')[0];
  const rest = markdown.slice(start + heading.length + 2);
  // The section ends at the next heading of the same or a higher level.
  const end = rest.search(new RegExp(`\\n#{1,${level.length}} `));
  const section = end < 0 ? rest : rest.slice(0, end);
  return /```sh\n([\s\S]*?)```/.exec(section)?.[1];
}

export function installSequence(): string {
  const block = shBlockUnder(readFileSync(path.join(REPO_ROOT, 'docs/install.md'), 'utf8'), '## Install sequence');
  if (block === undefined) throw new Error('docs/install.md has no ```sh block under "## Install sequence"');
  return block;
}
