import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { addAgentToTopologyFile } from '../../src/deploy/scale-out';

const TOPOLOGY = `name: prod   # the CLI context
global:
  deploy_dir: ./kcm-prod
  packages_dir: /srv/dist
managers:
  - { host: 10.0.0.11, port: 58000, data_dir: /var/lib/kcm/manager-with-a-long-name-to-pass-eighty-columns }
agents:
  # rack r1
  - { host: 10.0.0.21, cores: 16, memory_mb: 65536 }
`;

describe('kcm scale-out --agent', () => {
  let dir: string | undefined;
  afterEach(() => dir && rmSync(dir, { recursive: true, force: true }));
  const file = () => {
    dir = mkdtempSync(path.join(tmpdir(), 'kcm-scale-out-'));
    const f = path.join(dir, 'topology.yaml');
    writeFileSync(f, TOPOLOGY);
    return f;
  };

  it('appends the entry and keeps the file as written: comments, one-line entries', () => {
    const f = file();
    expect(addAgentToTopologyFile(f, '{host: 10.0.0.22, rack: r2, cores: 8, memory_mb: 32768}')).toBe('10.0.0.22');
    const text = readFileSync(f, 'utf8');
    expect(text.startsWith(TOPOLOGY.replace('prod   #', 'prod #'))).toBe(true);
    expect(text).toContain('host: 10.0.0.22');
  });

  it('a bad entry is refused naming its key, and the file is not changed', () => {
    const f = file();
    expect(() => addAgentToTopologyFile(f, '{host: 10.0.0.22, memory_mb: 32768}')).toThrow('agents[1].cores');
    expect(() => addAgentToTopologyFile(f, '{host: 10.0.0.21, cores: 1, memory_mb: 1024}')).toThrow(/agents\[1\]\.host.*already agents\[0\]/);
    expect(() => addAgentToTopologyFile(f, '[1, 2]')).toThrow(/--agent: must be a mapping/);
    expect(readFileSync(f, 'utf8')).toBe(TOPOLOGY);
  });
});
