// kcm deploy's command line: a topology or packages the operator must fix is one line
// naming the key, exit 1, and nothing is made (no deploy_dir, no CA).

import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runKcm } from '../helpers';

describe('kcm deploy command line', () => {
  let dir: string | undefined;
  afterEach(() => dir && rmSync(dir, { recursive: true, force: true }));
  const topology = (text: string) => {
    dir = mkdtempSync(path.join(tmpdir(), 'kcm-deploy-cmd-'));
    const file = path.join(dir, 'topology.yaml');
    writeFileSync(file, text);
    return file;
  };
  const GOOD = 'name: t\nglobal: { deploy_dir: ./state, packages_dir: ./dist }\nmanagers:\n  - { host: 127.0.3.9 }\nagents:\n  - { host: 127.0.4.9, cores: 1, memory_mb: 1024 }\n';

  it('a misspelt key: one line naming it and its line, exit 1, nothing made', async () => {
    const file = topology(GOOD.replace('cores: 1', 'core: 1'));
    const { code, stdout, stderr } = await runKcm(['deploy', file]);
    expect(code).toBe(1);
    expect(stderr).toBe('kcm: agents[0].core (line 6): is not a topology key\n');
    expect(stdout).toBe('');
    expect(existsSync(path.join(dir!, 'state'))).toBe(false);
  });

  it('no packages where global.packages_dir says: one line naming the key and the folder', async () => {
    const file = topology(GOOD);
    const { code, stderr } = await runKcm(['deploy', file]);
    expect(code).toBe(1);
    expect(stderr).toBe(`kcm: global.packages_dir: cannot read ${path.join(dir!, 'dist')} (ENOENT)\n`);
    expect(existsSync(path.join(dir!, 'state'))).toBe(false);
  });

  it('a topology file that is not there, and a missing argument', async () => {
    expect(await runKcm(['deploy', '/nonexistent/topology.yaml'])).toMatchObject({ code: 1, stderr: 'kcm: /nonexistent/topology.yaml: cannot be read (ENOENT)\n' });
    expect(await runKcm(['display'])).toMatchObject({ code: 2 });
    expect((await runKcm(['member', 'replace', '10.0.0.12:58000', '10.0.0.14'])).stderr).toContain('member replace needs --topology');
  });
});
