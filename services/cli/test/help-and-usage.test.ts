import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { JOB_MODES, JOB_TYPES } from '@kcm/protocol';
import { runKcm } from './helpers';

const REPO = join(import.meta.dirname, '../../..');

describe('help', () => {
  it('kcm --help lists every job type with its mode and summary', async () => {
    const { code, stdout } = await runKcm(['--help']);
    expect(code).toBe(0);
    for (const jobType of JOB_TYPES) expect(stdout).toMatch(new RegExp(`^  ${jobType} +${JOB_MODES[jobType]} +\\S`, 'm'));
    expect(stdout).toContain('delete_shards            async  ');
    expect(stdout).toContain('(also: delete_shard)');
  });

  it('kcm emit <job_type> --help lists required and optional paras and a fixture example', async () => {
    const { code, stdout } = await runKcm(['emit', 'create_cluster', '--help']);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^  nodes +required +.*>= 3/m);
    expect(stdout).toMatch(/^  dbcfg +optional, default "0"/m);
    expect(stdout).toContain('kcm emit create_cluster --file test/fixtures/emit/create_cluster.json');
  });

  it('every subcommand has its own help', async () => {
    for (const command of ['emit', 'status', 'get', 'local']) {
      const { code, stdout } = await runKcm([command, '--help']);
      expect(code).toBe(0);
      expect(stdout).toContain(`Usage: kcm ${command}`);
    }
    expect((await runKcm(['get', '--help'])).stdout).toMatch(/^  get_cluster_detail +.*\n +paras: \[cluster_name\] \[cluster_id\]/m);
  });
});

describe('usage errors', () => {
  it('an unknown subcommand names the commands and points at --help, exit 2', async () => {
    const { code, stderr } = await runKcm(['submit']);
    expect(code).toBe(2);
    // The first commands in their order; later ones (context, deploy, ...) each named once.
    expect(stderr).toMatch(/^kcm: unknown command "submit"; commands: emit, status, get, local, audit(, [a-z-]+)*\nRun 'kcm --help' for usage\.\n$/);
    expect(stderr).toContain(', context');
  });

  it('an unknown flag is a usage error for that subcommand', async () => {
    const { code, stderr } = await runKcm(['status', '1', '--wiat']);
    expect(code).toBe(2);
    expect(stderr).toContain("Unknown option '--wiat'");
    expect(stderr).toContain("Run 'kcm status --help' for usage.");
  });

  // Never `local up` here: it would start a real group on the default addresses (test/local does that on its own block).
  it('kcm local with an unknown subcommand is a usage error, exit 2', async () => {
    const { code, stderr } = await runKcm(['local', 'restart']);
    expect(code).toBe(2);
    expect(stderr).toBe(`kcm: unknown local subcommand "restart"; subcommands: up, down, status\nRun 'kcm local --help' for usage.\n`);
  });

  it('runs as a program through tsx with the documented exit codes', () => {
    const tsx = join(REPO, 'node_modules/.bin/tsx');
    const help = spawnSync(tsx, ['services/cli/src/main.ts', '--help'], { cwd: REPO, encoding: 'utf8', timeout: 30_000 });
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('create_cluster');
    const bad = spawnSync(tsx, ['services/cli/src/main.ts', 'emit', 'get_meta_mode', '--url', 'http://127.0.0.1:9'], { cwd: REPO, encoding: 'utf8', timeout: 30_000 });
    expect(bad.status).toBe(3);
    expect(bad.stderr).toContain('cannot reach the manager at http://127.0.0.1:9');
  });
});
