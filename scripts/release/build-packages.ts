// Builds kcm's Debian packages: `scripts/release/build-packages.sh <outdir>` (this file, run by
// tsx at build time only). The packages run compiled JavaScript on Node 20 with nothing from
// the repository's dev dependencies: each program is one esbuild bundle, and what cannot be
// bundled (classic-level's native LevelDB addon, loaded by node-gyp-build from its package
// folder) is copied beside it with its own runtime dependencies.
//
// Output (the names are stable; test/release/build-once.ts and the deploy test rely on them):
//   <outdir>/kcm-manager_<version>_all.deb
//   <outdir>/kcm-agent_<version>_amd64.deb     (kcm_ddl is compiled for this machine)
//   <outdir>/kcm-cli_<version>_all.deb
// <version> is KCM_VERSION (libs/common/src/kcm-protocol.ts), the one release version.
// manager and cli are `all`: the only native code in them is classic-level's prebuilt
// addon, shipped for linux x64, arm64 and armv7 (the architectures Node 20 is built for),
// and node-gyp-build picks the right one at run time.
//
// File layout (stable: the deploy test extracts these packages into per-host roots):
//   kcm-manager  /usr/bin/kcm-manager -> ../lib/kcm/manager/kcm-manager.mjs
//                /usr/lib/kcm/manager/{kcm-manager.mjs, proto/, console/ (lit-html/ inside), node_modules/}
//                /lib/systemd/system/kcm-manager@.service   (instance %i reads /etc/kcm/manager-%i.json)
//                /usr/share/doc/kcm-manager/{copyright, examples/manager.json}
//   kcm-agent    /usr/bin/kcm-agent -> ../lib/kcm/agent/kcm-agent.mjs
//                /usr/lib/kcm/agent/{kcm-agent.mjs, proto/}
//                /usr/lib/postgresql/15/lib/kcm_ddl.so (+ bitcode/), /usr/share/postgresql/15/extension/kcm_ddl{.control,--1.0.sql}
//                /lib/systemd/system/kcm-agent.service     (reads /etc/kcm/agent.env)
//                /usr/share/doc/kcm-agent/{copyright, examples/agent.env}
//   kcm-cli      /usr/bin/kcm -> ../lib/kcm/cli/kcm.mjs
//                /usr/lib/kcm/cli/{kcm.mjs, backup-open.mjs, proto/, node_modules/}, /usr/share/doc/kcm-cli/copyright
// Each copyright file holds the licence of every npm package compiled into or shipped with it.
// The postinst of manager and agent (scripts/release/postinst.sh) creates the `kcm` system
// user and group and /etc/kcm (root:kcm 0750), /etc/kcm/tls (root:kcm 0750), /var/lib/kcm
// (root:root 0755), /var/lib/kcm/manager (kcm:kcm 0700) and /var/lib/kcm/agent (root:root 0700).
// The manager runs as kcm, the agent as root. No file under /etc/kcm is shipped. Their prerm
// (scripts/release/prerm.sh) stops the units on removal; /etc/kcm and /var/lib/kcm are kept.
//
// The /usr/bin links are relative, so a package unpacked into any root (dpkg-deb -x) runs
// from there: `<root>/usr/bin/kcm --version`.

import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { KCM_VERSION } from '../../libs/common/src/kcm-protocol';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** What each package holds and declares. */
interface PackageSpec {
  name: 'kcm-manager' | 'kcm-agent' | 'kcm-cli';
  /** The folder under /usr/lib/kcm. */
  role: 'manager' | 'agent' | 'cli';
  /** The command on PATH, and its bundle's file name (<bin>.mjs). */
  bin: string;
  entry: string;
  arch: 'all' | 'amd64';
  depends: string[];
  description: string;
  /** Packages kept out of the bundle and copied into its node_modules/. */
  external: string[];
  console: boolean;
  unit?: string;
  example?: string;
  /** Repository files shipped as they are into /usr/lib/kcm/<role>/ (executable). */
  tools?: string[];
  kcmDdl: boolean;
  postinst: boolean;
}

const NODE = 'nodejs (>= 20)';

/**
 * The agent's Debian dependencies are what it runs (services/agent/src: exec/spawn): mariadbd,
 * mariadb-install-db, mariadb-upgrade (mariadb-server); mariabackup, mbstream (mariadb-backup);
 * mariadb, mariadb-dump, mariadb-binlog (mariadb-client); initdb, postgres, pg_ctl, pg_dump,
 * pg_restore (postgresql-15); ss (iproute2); zstd; and apt-get/dpkg for the engine cache
 * (essential). kcm_ddl needs mysql_fdw, PL/Python with pymysql for its triggers, and libpq5.
 */
const AGENT_DEPENDS = [
  NODE,
  'mariadb-server',
  'mariadb-backup',
  'mariadb-client',
  'postgresql-15',
  'postgresql-15-mysql-fdw',
  'postgresql-plpython3-15',
  'python3-pymysql',
  'libpq5',
  'zstd',
  'iproute2',
];

export const PACKAGES: PackageSpec[] = [
  {
    name: 'kcm-manager',
    role: 'manager',
    bin: 'kcm-manager',
    entry: 'services/manager/src/main.ts',
    arch: 'all',
    depends: [NODE],
    description: 'kcm manager: the Raft-replicated control plane member (Emit API, console, job runner)',
    external: ['classic-level'],
    console: true,
    unit: 'deploy/systemd/kcm-manager@.service',
    example: 'deploy/config/manager-m1.json',
    kcmDdl: false,
    postinst: true,
  },
  {
    name: 'kcm-agent',
    role: 'agent',
    bin: 'kcm-agent',
    entry: 'services/agent/src/main.ts',
    arch: 'amd64',
    depends: AGENT_DEPENDS,
    description: 'kcm agent: installs and operates MariaDB and PostgreSQL instances on a database host',
    external: [],
    console: false,
    unit: 'deploy/systemd/kcm-agent.service',
    example: 'deploy/config/agent.env',
    kcmDdl: true,
    postinst: true,
  },
  {
    name: 'kcm-cli',
    role: 'cli',
    bin: 'kcm',
    entry: 'services/cli/src/main.ts',
    arch: 'all',
    depends: [NODE],
    description: 'kcm command line client (Emit jobs, status, audit verification)',
    // `kcm audit verify` reads a member's Raft storage (LevelDB) offline.
    external: ['classic-level'],
    console: false,
    // Opens a sealed backup object with nothing but Node and the KEK (docs/backup-encryption.md).
    tools: ['scripts/backup-open.mjs'],
    kcmDdl: false,
    postinst: false,
  },
];

export function packageFileName(spec: Pick<PackageSpec, 'name' | 'arch'>, version = KCM_VERSION): string {
  return `${spec.name}_${version}_${spec.arch}.deb`;
}

/**
 * esbuild output is ESM; the CommonJS packages it bundles (fastify, grpc-js, pino) still call
 * require() for Node's own modules and read __dirname, which ESM lacks: the banner defines them
 * from the bundle's own URL. The shebang makes the bundle the command itself.
 */
const BANNER = [
  '#!/usr/bin/env node',
  "import { createRequire as __kcmCreateRequire } from 'node:module';",
  "import { fileURLToPath as __kcmFileURLToPath } from 'node:url';",
  'const require = __kcmCreateRequire(import.meta.url);',
  'const __filename = __kcmFileURLToPath(import.meta.url);',
  "const __dirname = __kcmFileURLToPath(new URL('.', import.meta.url));",
].join('\n');

/** Bundles one program; returns the npm packages (name -> folder) whose code went into it. */
async function bundle(spec: PackageSpec, outfile: string): Promise<Map<string, string>> {
  const result = await build({
    entryPoints: [path.join(REPO_ROOT, spec.entry)],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: spec.external,
    define: { KCM_RELEASE_BUNDLE: 'true' },
    banner: { js: BANNER },
    legalComments: 'none',
    logLevel: 'warning',
    metafile: true,
    // The metafile's input paths are relative to this.
    absWorkingDir: REPO_ROOT,
  });
  chmodSync(outfile, 0o755);
  const packages = new Map<string, string>();
  for (const input of Object.keys(result.metafile.inputs)) {
    const match = /^(.*node_modules\/)((?:@[^/]+\/)?[^/]+)\//.exec(input);
    if (match) packages.set(match[2], path.join(REPO_ROOT, match[1], match[2]));
  }
  return packages;
}

/**
 * /usr/share/doc/<package>/copyright: the licence of every npm package whose code the bundle
 * holds or that ships beside it, as their licences ask of a redistribution.
 */
function copyrightFile(spec: PackageSpec, bundled: Map<string, string>): string {
  const sections = [...bundled.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([name, dir]) => {
    const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version?: string; license?: string };
    const licenceFile = readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f));
    const text = licenceFile ? readFileSync(path.join(dir, licenceFile), 'utf8').trim() : `(no licence file in the package; package.json says ${manifest.license ?? 'nothing'})`;
    return [`Files: /usr/lib/kcm/${spec.role}/* (bundled npm package ${name} ${manifest.version ?? ''})`.trimEnd(), `License: ${manifest.license ?? 'see below'}`, ...text.split('\n').map((line) => ` ${line.trim() === '' ? '.' : line}`)].join('\n');
  });
  return [
    'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/',
    `Upstream-Name: kcm (${spec.name})`,
    'Comment: kcm itself is built from its source repository; below, the npm packages compiled into',
    ' this package\'s bundle or shipped in its node_modules, each with its licence as published.',
    '',
    sections.join('\n\n'),
    '',
  ].join('\n');
}

/** A package's folder in node_modules, looked up from `from` the way Node does. */
function packageDir(name: string, from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (path.dirname(dir) === dir) throw new Error(`cannot find package ${name} from ${from}`);
  }
}

/**
 * Copies `names` and their runtime dependencies (package.json "dependencies", recursively) into
 * `target/node_modules`, flat: an `npm ci --omit=dev` of just these. classic-level's prebuilt
 * addons are trimmed to Linux glibc builds.
 */
function copyRuntimeModules(names: string[], target: string): Map<string, string> {
  const seen = new Map<string, string>();
  const visit = (name: string, from: string) => {
    if (seen.has(name)) return;
    const dir = packageDir(name, from);
    seen.set(name, dir);
    const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    for (const dep of Object.keys(manifest.dependencies ?? {})) visit(dep, dir);
  };
  for (const name of names) visit(name, REPO_ROOT);
  for (const [name, dir] of seen) {
    const dest = path.join(target, 'node_modules', name);
    cpSync(dir, dest, {
      recursive: true,
      filter: (src) => {
        const rel = path.relative(dir, src);
        if (rel.split(path.sep).includes('node_modules')) return false;
        if (/^(deps|test|binding\.gyp|.*\.(md|cc|h))$/.test(rel.split(path.sep)[0] ?? '') && rel !== '') return false;
        if (rel.startsWith(`prebuilds${path.sep}`)) return /^prebuilds\/linux-(x64|arm64|arm)(\/|$)/.test(rel) && !rel.includes('musl');
        return true;
      },
    });
  }
  return seen;
}

/** kcm_ddl built with PGXS from a copy of its sources, installed into `root` (DESTDIR). */
function buildKcmDdl(root: string, work: string): void {
  const src = path.join(work, 'kcm_ddl');
  cpSync(path.join(REPO_ROOT, 'services/agent/pg-ext/kcm_ddl'), src, {
    recursive: true,
    filter: (file) => !/\.(o|so|bc)$/.test(file) && !file.endsWith('kcm_ddl--1.0.sql'),
  });
  execFileSync('make', ['-s', '-C', src], { stdio: ['ignore', 'ignore', 'inherit'] });
  execFileSync('make', ['-s', '-C', src, 'install', `DESTDIR=${root}`], { stdio: ['ignore', 'ignore', 'inherit'] });
}

function folderBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += statSync(path.join(entry.parentPath, entry.name)).size;
  }
  return total;
}

function controlFile(spec: PackageSpec, version: string, root: string): string {
  return [
    `Package: ${spec.name}`,
    `Version: ${version}`,
    `Architecture: ${spec.arch}`,
    'Maintainer: kcm maintainers <kcm@localhost>',
    `Installed-Size: ${Math.ceil(folderBytes(root) / 1024)}`,
    `Depends: ${spec.depends.join(', ')}`,
    'Section: database',
    'Priority: optional',
    `Description: ${spec.description}`,
    ' Part of kcm, a Raft-replicated control plane for MariaDB/PostgreSQL clusters.',
    ' Node 20 comes from NodeSource or the official tarball: docs/install-packages.md.',
    '',
  ].join('\n');
}

async function stagePackage(spec: PackageSpec, version: string, work: string): Promise<string> {
  const root = path.join(work, spec.name);
  const lib = path.join(root, 'usr/lib/kcm', spec.role);
  mkdirSync(lib, { recursive: true });
  const bundled = await bundle(spec, path.join(lib, `${spec.bin}.mjs`));
  cpSync(path.join(REPO_ROOT, 'proto'), path.join(lib, 'proto'), { recursive: true, filter: (f) => statSync(f).isDirectory() || f.endsWith('.proto') });
  if (spec.console) {
    cpSync(path.join(REPO_ROOT, 'services/manager/console'), path.join(lib, 'console'), { recursive: true });
    const litHtml = packageDir('lit-html', REPO_ROOT);
    cpSync(litHtml, path.join(lib, 'console/lit-html'), {
      recursive: true,
      filter: (f) => statSync(f).isDirectory() || (f.endsWith('.js') && !f.includes(`${path.sep}development${path.sep}`)),
    });
    bundled.set('lit-html', litHtml);
  }
  for (const tool of spec.tools ?? []) {
    cpSync(path.join(REPO_ROOT, tool), path.join(lib, path.basename(tool)));
    chmodSync(path.join(lib, path.basename(tool)), 0o755);
  }
  if (spec.external.length > 0) {
    for (const [name, dir] of copyRuntimeModules(spec.external, lib)) bundled.set(name, dir);
  }
  const doc = path.join(root, 'usr/share/doc', spec.name);
  mkdirSync(doc, { recursive: true });
  writeFileSync(path.join(doc, 'copyright'), copyrightFile(spec, bundled));
  mkdirSync(path.join(root, 'usr/bin'), { recursive: true });
  symlinkSync(`../lib/kcm/${spec.role}/${spec.bin}.mjs`, path.join(root, 'usr/bin', spec.bin));
  if (spec.unit) {
    mkdirSync(path.join(root, 'lib/systemd/system'), { recursive: true });
    cpSync(path.join(REPO_ROOT, spec.unit), path.join(root, 'lib/systemd/system', path.basename(spec.unit)));
  }
  if (spec.example) {
    const examples = path.join(doc, 'examples');
    mkdirSync(examples, { recursive: true });
    cpSync(path.join(REPO_ROOT, spec.example), path.join(examples, path.basename(spec.example).replace(/-m1(?=\.json$)/, '')));
  }
  if (spec.kcmDdl) buildKcmDdl(root, path.join(work, 'pg-ext'));
  const debian = path.join(root, 'DEBIAN');
  mkdirSync(debian);
  writeFileSync(path.join(debian, 'control'), controlFile(spec, version, root));
  if (spec.postinst) {
    for (const script of ['postinst', 'prerm']) {
      cpSync(path.join(REPO_ROOT, `scripts/release/${script}.sh`), path.join(debian, script));
      chmodSync(path.join(debian, script), 0o755);
    }
  }
  return root;
}

export interface BuiltPackages {
  version: string;
  /** Absolute .deb paths by package name. */
  files: Record<PackageSpec['name'], string>;
}

/** Builds all three packages into `outdir`; returns their paths. */
export async function buildPackages(outdir: string): Promise<BuiltPackages> {
  const version = KCM_VERSION;
  mkdirSync(outdir, { recursive: true });
  const work = mkdtempSync(path.join(tmpdir(), 'kcm-release-'));
  const files = {} as BuiltPackages['files'];
  try {
    for (const spec of PACKAGES) {
      const root = await stagePackage(spec, version, work);
      const deb = path.resolve(outdir, packageFileName(spec, version));
      // Files belong to root:root whoever builds; modes are as staged (0755 bins and dirs, 0644 files).
      execFileSync('dpkg-deb', ['--root-owner-group', '-Zxz', '--build', root, deb], { stdio: ['ignore', 'ignore', 'inherit'] });
      files[spec.name] = deb;
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return { version, files };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outdir = process.argv[2];
  if (!outdir || process.argv.length > 3) {
    process.stderr.write('usage: scripts/release/build-packages.sh <outdir>\n');
    process.exit(2);
  }
  const started = Date.now();
  const built = await buildPackages(outdir);
  for (const file of Object.values(built.files)) process.stdout.write(`${file} ${(statSync(file).size / 1024).toFixed(0)} KiB\n`);
  process.stdout.write(`built kcm ${built.version} packages in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}
