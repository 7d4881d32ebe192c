// The README's "## Install on real hosts" section and the system test run the same commands:
// test/release/deploy-packages.test.ts runs docs/install.md's install sequence block, and
// this checks the README shows that block verbatim.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { installSequence, REPO_ROOT, shBlockUnder } from '../../../../test/release/install-sequence';

describe('install sequence', () => {
  it('docs/install.md has the block the system test runs, and it deploys from $TOPOLOGY', () => {
    expect(installSequence()).toContain('kcm deploy "$TOPOLOGY"');
  });

  it('the README\'s "## Install on real hosts" section shows the same block verbatim', () => {
    const readme = readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
    const start = readme.indexOf('\n## Install on real hosts\n');
    expect(start, 'README.md has no "## Install on real hosts" section').toBeGreaterThanOrEqual(0);
    const rest = readme.slice(start + 1);
    const end = rest.slice(1).search(/\n## /);
    const section = end < 0 ? rest : rest.slice(0, end + 1);
    expect(section).toContain(`\`\`\`sh\n${installSequence()}\`\`\``);
  });

  it('finds a block only under its own heading', () => {
    const md = '# T\n## A\n```sh\na\n```\n## B\ntext\n### B1\n```sh\nb\n```\n## C\n```sh\nc\n```\n';
    expect(shBlockUnder(md, '## A')).toBe('a\n');
    expect(shBlockUnder(md, '## B')).toBe('b\n');
    expect(shBlockUnder(md, '## D')).toBeUndefined();
  });
});
