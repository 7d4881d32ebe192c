// The release installed as an operator would, on six simulated hosts: the packages built
// (buildPackagesOnce), kcm-cli unpacked for the operator, and docs/install.md's install
// sequence run with a topology of 3 managers (127.0.3.1-3) and 3 agents (127.0.4.1-3) on
// the local-root transport: each host is a directory standing for its /, the packages are
// unpacked into it and each daemon is started as its unit's ExecStart would. Then a cluster
// is created through HTTPS Emit (trusting only the generated CA) and a row written and read
// back through its compute node. Nothing may be written outside the roots, the operator's
// test directory and the paths listed in ALLOWED_OUTSIDE below.
//
// Loopback blocks 127.0.3.x / 127.0.4.x: no other system test binds them (only unit tests
// use them as strings in in-memory state).

import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '@kcm/protocol';
import { buildPackagesOnce, type BuiltPackages } from './build-once';
import { installSequence } from './install-sequence';
import { createEmitClient } from '../../services/cli/src/http-client';
import { loadContext } from '../../services/cli/src/context-file';
import { findInstances, instanceProcess } from '../../services/cli/src/local/instances';
import { stopProcesses } from '../../services/cli/src/local/processes';
import { purgeInstanceCgroups } from '../../services/cli/src/local/cgroups';

const MANAGERS = ['127.0.3.1', '127.0.3.2', '127.0.3.3'];
const AGENTS = ['127.0.4.1', '127.0.4.2', '127.0.4.3'];
/** The host scale-out adds, and the one that replaces the third manager. */
const NEW_AGENT = '127.0.4.4';
const NEW_MANAGER = '127.0.3.4';
const HTTP_PORT = 58000;
const AGENT_PORT = 58100;

/**
 * Written outside the roots by design, each with why. Every other path written during the
 * test (found by `find -newer` over the directories a package could touch) fails it.
 */
const ALLOWED_OUTSIDE: Array<{ prefix: string; why: string }> = [
  { prefix: '/var/cache/kcm/engines', why: 'the agent\'s host-wide engine cache (docs/engine-versions.md): engines unpacked once per host, shared by every agent of the machine' },
  { prefix: '/var/log/journal', why: 'the machine\'s journal, written by systemd-journald for any process on the machine' },
  { prefix: '/root/.npm', why: 'npm\'s cache and logs: the other helpers and vitest workers running beside this test' },
  { prefix: '/root/.cache', why: 'tool caches (vitest, playwright) of the processes running beside this test' },
];
/**
 * Not scanned: virtual filesystems (/proc, /sys incl. the instances' cgroups, /dev, /run:
 * postgres's socket lock in /run/postgresql), the machine's shared scratch space (/tmp,
 * /dev/shm: every test and tool of the machine writes there at once; the roots live under
 * it) and the checkout (/work: the other helpers edit it while this runs).
 */
const SCANNED = ['/etc', '/usr', '/var', '/opt', '/srv', '/home', '/root', '/lib', '/bin', '/sbin', '/boot', '/mnt', '/media'];

function topologyYaml(dir: string, packagesDir: string): string {
  const lines = [
    'name: systest',
    'global:',
    `  deploy_dir: ${path.join(dir, 'operator/kcm-systest')}`,
    `  packages_dir: ${packagesDir}`,
    '  transport: local-root',
    `  agent_port: ${AGENT_PORT}`,
    'managers:',
    ...MANAGERS.map((host, i) => `  - { host: ${host}, port: ${HTTP_PORT}, root: ${path.join(dir, `hosts/m${i + 1}`)} }`),
    'agents:',
    ...AGENTS.map((host, i) => `  - { host: ${host}, rack: r${i + 1}, cores: 2, memory_mb: 2048, data_dir: /var/lib/kcm/data, root: ${path.join(dir, `hosts/a${i + 1}`)} }`),
    '',
  ];
  return lines.join('\n');
}

function writtenOutside(marker: string): string[] {
  const scan = SCANNED.filter((d) => existsSync(d));
  const found = spawnSync('find', [...scan, '-xdev', '-newer', marker, '(', '-type', 'f', '-o', '-type', 'l', ')', '-print'], { encoding: 'utf8', maxBuffer: 64 * 2 ** 20 });
  // A file another process removes while find walks (an npm log) is not a failure to read.
  const unreadable = found.stderr.split('\n').filter((l) => l !== '' && !/No such file or directory/.test(l));
  expect(unreadable, 'find could not read everything').toEqual([]);
  const written = found.stdout.split('\n').filter((p) => p !== '');
  const allowedBy = (p: string) => ALLOWED_OUTSIDE.find((a) => p === a.prefix || p.startsWith(`${a.prefix}/`));
  // What the exceptions covered in this run, so a reader sees they are not hiding kcm's own files.
  const covered = new Map<string, number>();
  for (const p of written) if (allowedBy(p)) covered.set(allowedBy(p)!.prefix, (covered.get(allowedBy(p)!.prefix) ?? 0) + 1);
  console.log(`written outside the roots during the test: ${written.length} file(s); by the listed exceptions: ${[...covered].map(([prefix, n]) => `${prefix} ${n}`).join(', ') || 'none'}`);
  return written.filter((p) => !allowedBy(p));
}

describe('kcm deploy from the release packages onto six local roots', () => {
  let dir: string;
  let packages: BuiltPackages;
  let packagesDir: string;
  let kcm: string;
  let env: NodeJS.ProcessEnv;
  let topologyFile: string;
  let marker: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'kcm-deploy-packages-'));
    // mkdtemp makes it 0700; the roots inside stand for hosts' / (0755), whose instance
    // directories the engines (mysql, postgres) must reach.
    chmodSync(dir, 0o711);
    marker = path.join(dir, 'marker');
    writeFileSync(marker, '');
    // find -newer compares modification times: a file written in the same clock tick as the
    // marker must still count, so the marker is dated a second back.
    const back = new Date(statSync(marker).mtimeMs - 1_000);
    execFileSync('touch', ['-d', back.toISOString(), marker]);
    packages = await buildPackagesOnce();
    packagesDir = path.dirname(packages.files['kcm-manager']);
    // The operator's machine: kcm-cli unpacked (its /usr/bin/kcm is a relative link) and a home.
    const operator = path.join(dir, 'operator');
    mkdirSync(path.join(operator, 'home'), { recursive: true });
    execFileSync('dpkg-deb', ['-x', packages.files['kcm-cli'], path.join(operator, 'cli')]);
    kcm = path.join(operator, 'cli/usr/bin/kcm');
    topologyFile = path.join(operator, 'topology.yaml');
    writeFileSync(topologyFile, topologyYaml(dir, packagesDir));
    env = { ...process.env, PATH: `${path.dirname(kcm)}:${process.env.PATH}`, HOME: path.join(operator, 'home'), KCM_CONFIG: path.join(operator, 'home/.config/kcm/config.json'), TOPOLOGY: topologyFile };
  }, 600_000);

  afterAll(async () => {
    if (dir === undefined) return;
    if (kcm !== undefined && existsSync(kcm)) spawnSync(kcm, ['deploy', topologyFile, '--stop'], { env, stdio: 'inherit', timeout: 120_000 });
    const hosts = [...AGENTS, NEW_AGENT].map((_, i) => path.join(dir, `hosts/a${i + 1}`));
    const instances = (await Promise.all(hosts.map((root) => findInstances(root, [path.join(root, 'var/lib/kcm/agent')])))).flat();
    await stopProcesses(instances.map(instanceProcess), { graceMs: 30_000 });
    await purgeInstanceCgroups([...AGENTS, NEW_AGENT]);
    if (!process.env.KCM_KEEP_TEST_DIR) rmSync(dir, { recursive: true, force: true });
  }, 240_000);

  it('installs with the documented commands, serves HTTPS Emit with the generated CA, and a compute node reads back a row; nothing is written outside the roots', async () => {
    const started = Date.now();
    const sequence = installSequence();
    const run = spawnSync('bash', ['-euo', 'pipefail', '-c', sequence], { env, encoding: 'utf8', timeout: 400_000 });
    console.log(`install sequence (${((Date.now() - started) / 1000).toFixed(1)} s):\n${run.stdout}${run.stderr}`);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toContain(`kcm ${packages.version}`);

    // The context the deploy wrote: HTTPS endpoints and the generated CA.
    const context = loadContext('systest', env.KCM_CONFIG)!;
    expect(context.endpoints).toEqual(MANAGERS.map((h) => `https://${h}:${HTTP_PORT}`));
    const ca = readFileSync(context.caFile!);
    const token = readFileSync(context.tokenFile!, 'utf8').trim();
    // The CA key never left the operator's directory: no root holds a file named ca.key.
    const caKeys = spawnSync('find', [path.join(dir, 'hosts'), '-name', 'ca.key'], { encoding: 'utf8' }).stdout.trim();
    expect(caKeys).toBe('');
    // Plain HTTP is refused on the same port (answered 400 from its first byte, docs/https.md).
    const plain = await fetch(`http://${MANAGERS[0]}:${HTTP_PORT}/HttpService/Emit`, { method: 'POST', body: '{}' });
    expect(plain.status).toBe(400);
    expect(await plain.text()).toContain('serves HTTPS only');

    const client = createEmitClient({ url: context.endpoints.join(','), ca, token, timeoutMs: 30_000 });
    const envelope = (jobType: string, paras: Record<string, unknown>, extra: Record<string, string> = {}) => ({
      version: PROTOCOL_VERSION, job_id: '', job_type: jobType, timestamp: String(Math.floor(Date.now() / 1000)), user_name: 'systest', paras, ...extra,
    });
    const created = (await client.emit(envelope('create_cluster', {
      nick_name: 'systest', ha_mode: 'rbr', shards: '1', nodes: '3', comps: '1', max_storage_size: '1', max_connections: '100', cpu_cores: '1',
      cpu_limit_node: 'share', innodb_size: '64', rocksdb_block_cache_size_M: '0', dbcfg: '1', fullsync_level: '1',
      storage_iplists: AGENTS, computer_iplists: [AGENTS[2]], install_proxysql: '0',
    }, { request_id: 'systest-create-cluster' }))).reply;
    expect(created.error_code, created.error_info).toBe('0');
    let status = created;
    const deadline = Date.now() + 300_000;
    while (status.status !== 'done' && status.status !== 'failed' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 1_000));
      status = (await client.emit(envelope('get_status', {}, { job_id: created.job_id }))).reply;
    }
    expect(status.status, status.error_info).toBe('done');
    const result = status.attachment as { cluster_name: string; computer_user: string; computer_pwd: string };
    const detail = (await client.emit(envelope('get_cluster_detail', { cluster_name: result.cluster_name }))).reply;
    const comp = (detail.attachment as { list_comp: Array<{ hostaddr: string; port: string }> }).list_comp[0];
    expect(comp.hostaddr).toBe(AGENTS[2]);

    const sql = new pg.Client({ host: comp.hostaddr, port: Number(comp.port), user: result.computer_user, password: result.computer_pwd, database: 'postgres' });
    await sql.connect();
    try {
      await sql.query('CREATE TABLE deployed (id int PRIMARY KEY, note text)');
      await sql.query(`INSERT INTO deployed VALUES (1, 'installed from packages')`);
      const { rows } = await sql.query('SELECT id, note FROM deployed');
      expect(rows).toEqual([{ id: 1, note: 'installed from packages' }]);
    } finally {
      await sql.end();
    }

    // Re-running deploy changes nothing and says so.
    const again = spawnSync(kcm, ['deploy', topologyFile], { env, encoding: 'utf8', timeout: 120_000 });
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout.match(/left alone/g)?.length).toBe(MANAGERS.length + AGENTS.length);
    expect(again.stdout).not.toContain('changed:');

    const display = spawnSync(kcm, ['display', topologyFile], { env, encoding: 'utf8', timeout: 60_000 });
    console.log(display.stdout);
    expect(display.status, display.stdout + display.stderr).toBe(0);
    expect(display.stdout).toMatch(new RegExp(`${AGENTS[2].replace(/\./g, '\\.')}\\s+reachable\\s+computer\\+storage online\\s+instances 2/2 online`));

    // Day 2: a fourth database host, added by scale-out from a one-line entry.
    const scaled = spawnSync(kcm, ['scale-out', topologyFile, '--agent', `{host: ${NEW_AGENT}, cores: 2, memory_mb: 2048, root: ${path.join(dir, 'hosts/a4')}}`], { env, encoding: 'utf8', timeout: 120_000 });
    console.log(scaled.stdout + scaled.stderr);
    expect(scaled.status, scaled.stderr).toBe(0);
    expect(scaled.stdout).toContain(`${NEW_AGENT} (local-root`);
    expect(scaled.stdout).toContain('machines: 2 registered now');
    expect(readFileSync(topologyFile, 'utf8')).toContain(`host: ${NEW_AGENT}`);

    // The leader dies (SIGKILL, as a lost host): the hardest member to replace, since the
    // others must elect a new one first. A new host takes its place in the topology.
    const leader = ((await client.emit(envelope('get_meta_mode', {}))).reply.attachment as { leader: string }).leader;
    const dead = MANAGERS.findIndex((h) => `${h}:${HTTP_PORT}` === leader);
    expect(dead, `leader ${leader}`).toBeGreaterThanOrEqual(0);
    const deadRecord = path.join(dir, `hosts/m${dead + 1}/run/kcm-local-root/kcm-manager@m${dead + 1}.service.json`);
    process.kill((JSON.parse(readFileSync(deadRecord, 'utf8')) as { pid: number }).pid, 'SIGKILL');
    const replaced = `  - { host: ${NEW_MANAGER}, port: ${HTTP_PORT}, root: ${path.join(dir, 'hosts/m4')}, join: true }`;
    const edited = readFileSync(topologyFile, 'utf8').replace(new RegExp(`^ {2}- \\{ host: ${MANAGERS[dead].replace(/\./g, '\\.')}, .*$`, 'm'), replaced);
    expect(edited).toContain(replaced);
    writeFileSync(topologyFile, edited);
    const replace = spawnSync(kcm, ['member', 'replace', leader, NEW_MANAGER, '--topology', topologyFile], { env, encoding: 'utf8', timeout: 180_000 });
    console.log(replace.stdout + replace.stderr);
    expect(replace.status, replace.stderr).toBe(0);
    const group = MANAGERS.map((h, i) => (i === dead ? NEW_MANAGER : h));
    // The leader learns a new member's release from its next Describe round: display says
    // "release not reported yet" until then, so it is asked again until every member shows it.
    const displayed = () => spawnSync(kcm, ['display', topologyFile], { env, encoding: 'utf8', timeout: 60_000 });
    let after = displayed();
    for (const until = Date.now() + 60_000; after.stdout.includes('release not reported yet') && Date.now() < until; after = displayed()) await new Promise((r) => setTimeout(r, 1_000));
    console.log(after.stdout);
    expect(after.status, after.stdout + after.stderr).toBe(0);
    for (const host of group) expect(after.stdout).toMatch(new RegExp(`${host.replace(/\./g, '\\.')}:${HTTP_PORT}\\s+reachable\\s+(leader|follower)\\s+kcm ${packages.version.replace(/\./g, '\\.')}`));
    expect(after.stdout).toMatch(new RegExp(`${NEW_AGENT.replace(/\./g, '\\.')}\\s+reachable\\s+computer\\+storage online`));
    expect(loadContext('systest', env.KCM_CONFIG)!.endpoints).toEqual(group.map((h) => `https://${h}:${HTTP_PORT}`));

    const outside = writtenOutside(marker);
    expect(outside, `written outside the roots: ${outside.join(', ')}`).toEqual([]);
    console.log(`deploy-packages: whole test ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }, 900_000);
});
