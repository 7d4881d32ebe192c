// Creates the directories a machine registration names and proves each is writable,
// so create_machine fails at registration rather than at the first install.

import { rm, writeFile } from 'node:fs/promises';
import { makeDirWithMode } from '@kcm/common';
import path from 'node:path';
import type { PrepareDirsReply } from '@kcm/agent-api';

export async function prepareDirs(dirs: string[]): Promise<PrepareDirsReply> {
  const problems: PrepareDirsReply['problems'] = [];
  for (const dir of dirs) {
    if (!path.isAbsolute(dir)) {
      problems.push({ dir, reason: 'must be an absolute path' });
      continue;
    }
    try {
      // Traversable, not listable: mysql and postgres pass through to their own directories.
      await makeDirWithMode(dir, 0o711);
      const probe = path.join(dir, `.kcm-write-probe-${process.pid}`);
      await writeFile(probe, 'ok');
      await rm(probe);
    } catch (err) {
      problems.push({ dir, reason: (err as NodeJS.ErrnoException).code ?? String(err) });
    }
  }
  return { problems };
}
