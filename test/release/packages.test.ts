// The release packages (scripts/release/build-packages.sh): what each .deb declares and
// holds, and that the programs run from them alone. The packages are unpacked into a
// temporary root outside the repository (dpkg-deb -x, as the deploy test does per host), and
// kcm, kcm-manager and kcm-agent run from there: `<root>/usr/bin/kcm --version`. A manager
// and an agent are started from the root as their units' ExecStart would run them and
// answer on their ports: the bundles find their protos, console and LevelDB addon in the
// package, not in the checkout.

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KCM_PROTOCOL, KCM_VERSION, versionLine } from '@kcm/common';
import { waitFor } from '../manager/helpers/processes';
import { REPO_ROOT, runProgram, stderrLines } from '../helpers/run-program';
import { buildPackagesOnce, type BuiltPackages } from './build-once';

// Loopback addresses of this file only (system tests run one file at a time).
const MANAGER = '127.0.1.31:58310';
const AGENT_HOST = '127.0.2.31';
const AGENT_PORT = 58320;

let built: BuiltPackages;
let root: string;
const children: ChildProcess[] = [];

/** `dpkg-deb --field` of one package, as a Map. */
function fields(deb: string): Map<string, string> {
  const text = execFileSync('dpkg-deb', ['--field', deb, 'Package', 'Version', 'Architecture', 'Depends'], { encoding: 'utf8' });
  return new Map(text.trim().split('\n').map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim()]));
}

/** `dpkg-deb --contents`: each path (without the leading `.`), symlinks as `path -> target`. */
function contents(deb: string): string[] {
  const text = execFileSync('dpkg-deb', ['--contents', deb], { encoding: 'utf8', maxBuffer: 64 * 2 ** 20 });
  return text.trim().split('\n').map((line) => line.split(/\s+/).slice(5).join(' ').replace(/^\./, ''));
}

/** The environment a unit gives: node on PATH (where this test's node is), nothing of the checkout. */
const unitEnv = () => ({ PATH: `${path.dirname(process.execPath)}:/usr/sbin:/usr/bin:/sbin:/bin`, HOME: root, KCM_LOG_LEVEL: 'info' });
/**
 * argv running a packaged program with the checkout out of its sight: as root, in a private
 * mount namespace with an empty tmpfs over the repository (unshare execs, so the pid is the
 * program's own). Anything a bundle still took from the checkout would fail there.
 */
const IS_ROOT = process.getuid?.() === 0;
const bin = (name: string) => {
  const program = path.join(root, 'usr/bin', name);
  if (!IS_ROOT) return [program];
  return ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', 'mount -t tmpfs -o size=1m tmpfs "$0" && cd / && exec "$@"', REPO_ROOT, program];
};
const runFromRoot = (name: string, args: string[]) => runProgram(bin(name), args, { ...Object.fromEntries(Object.keys(process.env).map((k) => [k, undefined])), ...unitEnv() });

function startFromRoot(name: string, args: string[], log: string): ChildProcess {
  const fd = openSync(log, 'a');
  const [command, ...prefix] = bin(name);
  const child = spawn(command, [...prefix, ...args], { cwd: root, env: unitEnv(), stdio: ['ignore', fd, fd] });
  closeSync(fd);
  children.push(child);
  return child;
}

/** True once a TCP connection to host:port is accepted. */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function stop(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  return exited;
}

describe('release packages', () => {
  beforeAll(async () => {
    const started = Date.now();
    built = await buildPackagesOnce();
    console.log(`packages ready in ${((Date.now() - started) / 1000).toFixed(1)} s (a build, or the cache of this source state)`);
    root = mkdtempSync(path.join(tmpdir(), 'kcm-package-root-'));
    for (const deb of Object.values(built.files)) execFileSync('dpkg-deb', ['-x', deb, root]);
  }, 300_000);

  afterAll(async () => {
    await Promise.all(children.map(stop));
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('are named <package>_<KCM_VERSION>_<arch>.deb and declare the version, architecture and dependencies', () => {
    expect(built.version).toBe(KCM_VERSION);
    const sizes: string[] = [];
    for (const [name, deb] of Object.entries(built.files)) {
      const arch = name === 'kcm-agent' ? 'amd64' : 'all';
      expect(path.basename(deb)).toBe(`${name}_${KCM_VERSION}_${arch}.deb`);
      const f = fields(deb);
      expect(f.get('Package')).toBe(name);
      expect(f.get('Version')).toBe(KCM_VERSION);
      expect(f.get('Architecture')).toBe(arch);
      sizes.push(`${path.basename(deb)} ${(readFileSync(deb).length / 1024).toFixed(0)} KiB`);
    }
    console.log(sizes.join('\n'));
    expect(fields(built.files['kcm-manager']).get('Depends')).toBe('nodejs (>= 20)');
    expect(fields(built.files['kcm-cli']).get('Depends')).toBe('nodejs (>= 20)');
    const agentDepends = fields(built.files['kcm-agent']).get('Depends')!.split(', ');
    for (const dep of ['nodejs (>= 20)', 'mariadb-server', 'mariadb-backup', 'mariadb-client', 'postgresql-15', 'postgresql-15-mysql-fdw', 'postgresql-plpython3-15', 'zstd', 'iproute2']) {
      expect(agentDepends).toContain(dep);
    }
  });

  it('hold the bins, units, assets and kcm_ddl at the documented paths, and nothing of the dev tools', () => {
    const manager = contents(built.files['kcm-manager']);
    const agent = contents(built.files['kcm-agent']);
    const cli = contents(built.files['kcm-cli']);
    expect(manager).toContain('/usr/bin/kcm-manager -> ../lib/kcm/manager/kcm-manager.mjs');
    expect(agent).toContain('/usr/bin/kcm-agent -> ../lib/kcm/agent/kcm-agent.mjs');
    expect(cli).toContain('/usr/bin/kcm -> ../lib/kcm/cli/kcm.mjs');
    expect(cli).toContain('/usr/lib/kcm/cli/backup-open.mjs');
    expect(manager).toContain('/lib/systemd/system/kcm-manager@.service');
    expect(agent).toContain('/lib/systemd/system/kcm-agent.service');
    for (const file of ['/usr/lib/kcm/manager/proto/raft.proto', '/usr/lib/kcm/manager/proto/agent.proto', '/usr/lib/kcm/manager/console/index.html', '/usr/lib/kcm/manager/console/lit-html/lit-html.js', '/usr/lib/kcm/manager/node_modules/classic-level/prebuilds/linux-x64/classic-level.node']) {
      expect(manager).toContain(file);
    }
    expect(agent).toContain('/usr/lib/kcm/agent/proto/agent-mariadb.proto');
    for (const file of ['/usr/lib/postgresql/15/lib/kcm_ddl.so', '/usr/share/postgresql/15/extension/kcm_ddl.control', '/usr/share/postgresql/15/extension/kcm_ddl--1.0.sql']) expect(agent).toContain(file);
    for (const [name, list] of [['kcm-manager', manager], ['kcm-agent', agent], ['kcm-cli', cli]] as const) expect(list).toContain(`/usr/share/doc/${name}/copyright`);
    const devTools = /\/node_modules\/(tsx|vitest|@vitest|vite|typescript|esbuild|@esbuild|playwright-core|s3rver|etcd3)\//;
    for (const file of [...manager, ...agent, ...cli]) expect(file).not.toMatch(devTools);
  });

  it('carry the licence of each npm package compiled into them or shipped beside them', () => {
    const copyright = readFileSync(path.join(root, 'usr/share/doc/kcm-manager/copyright'), 'utf8');
    for (const name of ['fastify', '@grpc/grpc-js', 'pino', 'zod', 'classic-level', 'lit-html']) expect(copyright).toMatch(new RegExp(`^Files: .*bundled npm package ${name} `, 'm'));
    expect(readFileSync(path.join(root, 'usr/share/doc/kcm-agent/copyright'), 'utf8')).toMatch(/bundled npm package @aws-sdk\/client-s3 /);
  });

  it('have units that run the installed bins, and a postinst that makes the kcm user and folders', () => {
    const managerUnit = readFileSync(path.join(root, 'lib/systemd/system/kcm-manager@.service'), 'utf8');
    const agentUnit = readFileSync(path.join(root, 'lib/systemd/system/kcm-agent.service'), 'utf8');
    expect(managerUnit).toMatch(/^ExecStart=\/usr\/bin\/kcm-manager --config \/etc\/kcm\/manager-%i\.json$/m);
    expect(managerUnit).toMatch(/^User=kcm$/m);
    expect(agentUnit).toMatch(/^ExecStart=\/usr\/bin\/kcm-agent /m);
    for (const unit of [managerUnit, agentUnit]) expect(unit).not.toMatch(/tsx|\/opt\/kcm/);
    for (const name of ['kcm-manager', 'kcm-agent'] as const) {
      const postinst = execFileSync('sh', ['-c', 'dpkg-deb --ctrl-tarfile "$1" | tar -xO ./postinst', 'sh', built.files[name]], { encoding: 'utf8' });
      expect(postinst).toMatch(/useradd --system .* kcm/);
      expect(postinst).toMatch(/install -d -o root -g kcm -m 0750 \/etc\/kcm/);
      const prerm = execFileSync('sh', ['-c', 'dpkg-deb --ctrl-tarfile "$1" | tar -xO ./prerm', 'sh', built.files[name]], { encoding: 'utf8' });
      expect(prerm).toContain(`systemctl stop ${name === 'kcm-manager' ? "'kcm-manager@*.service'" : 'kcm-agent.service'}`);
      execFileSync('sh', ['-n', '-c', prerm]);
    }
  });

  // postinst writes /etc/passwd, /etc/kcm and /var/lib/kcm: it runs in a private mount namespace
  // over a copy of /etc and empty /var/lib, /var/log and /run, so this host is left as it was.
  it.skipIf(process.getuid?.() !== 0)('postinst makes the kcm user and group and the owners and modes of /etc/kcm and /var/lib/kcm, again on a second run', () => {
    const work = mkdtempSync(path.join(tmpdir(), 'kcm-postinst-'));
    try {
      for (const name of ['kcm-manager', 'kcm-agent'] as const) {
        execFileSync('sh', ['-c', 'dpkg-deb --ctrl-tarfile "$1" | tar -xO ./postinst > "$2"', 'sh', built.files[name], path.join(work, name)]);
      }
      const script = [
        'set -e',
        'cp -a /etc "$1/etc" && mount --bind "$1/etc" /etc',
        'for dir in /var/lib /var/log /run; do mount -t tmpfs tmpfs "$dir"; done',
        'DPKG_MAINTSCRIPT_PACKAGE=kcm-manager sh "$1/kcm-manager" configure',
        'DPKG_MAINTSCRIPT_PACKAGE=kcm-agent sh "$1/kcm-agent" configure',
        'DPKG_MAINTSCRIPT_PACKAGE=kcm-manager sh "$1/kcm-manager" configure',
        'getent passwd kcm',
        "stat -c '%n %U:%G %a' /etc/kcm /etc/kcm/tls /var/lib/kcm /var/lib/kcm/manager /var/lib/kcm/agent",
      ].join('\n');
      const out = execFileSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', script, 'sh', work], { encoding: 'utf8' }).trim().split('\n');
      expect(out[0]).toMatch(/^kcm:x:\d+:\d+:[^:]*:\/var\/lib\/kcm:\/usr\/sbin\/nologin$/);
      expect(out.slice(1)).toEqual([
        '/etc/kcm root:kcm 750',
        '/etc/kcm/tls root:kcm 750',
        '/var/lib/kcm root:root 755',
        '/var/lib/kcm/manager kcm:kcm 700',
        '/var/lib/kcm/agent root:root 700',
      ]);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  it('kcm --version, kcm-manager --version and kcm-agent --version run from the unpacked root', async () => {
    for (const [name, program] of [['kcm', 'kcm'], ['kcm-manager', 'kcm-manager'], ['kcm-agent', 'kcm-agent']]) {
      expect(await runFromRoot(name, ['--version'])).toEqual({ code: 0, stdout: `${versionLine(program)}\n`, stderr: '' });
    }
  });

  it('kcm-manager --help and kcm-agent --help print their usage, exit 0; a bad flag and a bad config key are one line', async () => {
    const managerHelp = await runFromRoot('kcm-manager', ['--help']);
    expect(managerHelp.code).toBe(0);
    expect(managerHelp.stdout).toContain('usage: kcm-manager --config <file.json>');
    const agentHelp = await runFromRoot('kcm-agent', ['--help']);
    expect(agentHelp.code).toBe(0);
    expect(agentHelp.stdout).toContain('usage: kcm-agent ');
    const cliHelp = await runFromRoot('kcm', ['--help']);
    expect(cliHelp.code).toBe(0);

    const badFlag = await runFromRoot('kcm-agent', ['--prot', '1']);
    expect(badFlag.code).toBe(2);
    expect(stderrLines(badFlag)).toEqual({ lines: ['kcm-agent: unknown flag --prot; see kcm-agent --help'], hasStack: false });
    const config = path.join(root, 'bad.json');
    writeFileSync(config, JSON.stringify({ member: MANAGER, dataDir: path.join(root, 'var/lib/kcm/manager'), insecure: true, dataDirectory: '/x' }));
    const badKey = await runFromRoot('kcm-manager', ['--config', config]);
    expect(badKey.code).toBe(1);
    expect(stderrLines(badKey)).toEqual({ lines: [`kcm-manager: config ${config}: unknown key "dataDirectory"`], hasStack: false });
  });

  it('a manager started from the root serves Emit, the console and /metrics with its build', async () => {
    const config = path.join(root, 'etc/kcm/manager-m1.json');
    execFileSync('mkdir', ['-p', path.dirname(config)]);
    writeFileSync(config, JSON.stringify({ member: MANAGER, initialMembers: [MANAGER], dataDir: path.join(root, 'var/lib/kcm/manager'), agentPort: AGENT_PORT, insecure: true, logLevel: 'info' }));
    const manager = startFromRoot('kcm-manager', ['--config', config], path.join(root, 'manager.log'));
    const base = `http://${MANAGER}`;
    const metrics = await waitFor('the packaged manager\'s /metrics', async () => {
      const res = await fetch(`${base}/metrics`);
      return res.ok ? res.text() : undefined;
    }, 60_000, 200);
    expect(metrics.split('\n')).toContain(`kcm_build_info{version="${KCM_VERSION}",protocol="${KCM_PROTOCOL}"} 1`);

    const page = await fetch(`${base}/ui/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<script type="importmap">');
    const lit = await fetch(`${base}/ui/vendor/lit-html/lit-html.js`);
    expect(lit.status).toBe(200);

    // get_meta_mode: the group of one, led by this member (Raft on LevelDB: the packaged addon), with its build.
    const meta = await waitFor('a leader in get_meta_mode', async () => {
      const res = await fetch(`${base}/HttpService/Emit`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ version: '1.0', job_type: 'get_meta_mode', job_id: '', timestamp: String(Math.floor(Date.now() / 1000)), user_name: 'test', paras: {} }),
      });
      const reply = (await res.json()) as { error_code: string; attachment?: { list_member?: { member: string; role: string; kcm_version: string; protocol: string }[] } };
      const me = reply.attachment?.list_member?.find((m) => m.member === MANAGER);
      return me?.role === 'leader' ? me : undefined;
    }, 60_000, 200);
    expect(meta).toMatchObject({ kcm_version: KCM_VERSION, protocol: String(KCM_PROTOCOL) });
    expect(await stop(manager)).toBe(0);
    const log = readFileSync(path.join(root, 'manager.log'), 'utf8');
    expect(log).not.toContain(REPO_ROOT);

    // The packaged CLI reads the stopped member's Raft storage offline with its own copy of the LevelDB addon.
    const verify = await runFromRoot('kcm', ['audit', 'verify', '--data-dir', path.join(root, 'var/lib/kcm/manager')]);
    expect(verify.stderr).toBe('');
    expect(verify.stdout).toMatch(/^audit chain OK: /);
    expect(verify.code).toBe(0);
  });

  it('an agent started from the root listens on its gRPC port and stops on SIGTERM', async () => {
    const agent = startFromRoot('kcm-agent', ['--host', AGENT_HOST, '--port', String(AGENT_PORT), '--state-dir', path.join(root, 'var/lib/kcm/agent'), '--insecure'], path.join(root, 'agent.log'));
    await waitFor('the packaged agent\'s gRPC port', () => accepts(AGENT_HOST, AGENT_PORT), 60_000, 200);
    expect(agent.exitCode).toBe(null);
    expect(await stop(agent)).toBe(0);
  });

  it('the bundles name no path of the checkout they were built from', () => {
    for (const file of ['usr/lib/kcm/manager/kcm-manager.mjs', 'usr/lib/kcm/agent/kcm-agent.mjs', 'usr/lib/kcm/cli/kcm.mjs']) {
      const text = readFileSync(path.join(root, file), 'utf8');
      expect(text.includes(REPO_ROOT.replace(/\/$/, '')), file).toBe(false);
      expect(text, file).not.toMatch(/from ["']tsx|tsx\/esm/);
    }
  });
});
