// The packages kcm deploy installs, and what their systemd units say. The units are read
// from the .deb files themselves (unpacked once on the deploying machine), so the config
// file a manager reads and the environment file an agent reads are wherever the package's
// unit names them, for either transport.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { parseUnitFile, serviceCommand, unitValues, type UnitFile } from './systemd-unit';

export const UNIT_DIR = '/lib/systemd/system';

/** The packages a server gets (kcm-cli stays on the operator's machine). */
export type PackageName = 'kcm-manager' | 'kcm-agent';

export class PackageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PackageError';
  }
}

export interface DebPackage {
  name: PackageName | 'kcm-cli';
  file: string;
  version: string;
}

/** The one `<name>_<version>_<arch>.deb` of each package in dir; none or several is an error naming global.packages_dir. */
export function findPackages(dir: string, names: ReadonlyArray<DebPackage['name']>): Map<DebPackage['name'], DebPackage> {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch (err) {
    throw new PackageError(`global.packages_dir: cannot read ${dir} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const found = new Map<DebPackage['name'], DebPackage>();
  for (const name of names) {
    const files = entries.filter((e) => e.startsWith(`${name}_`) && e.endsWith('.deb')).sort();
    if (files.length !== 1) {
      throw new PackageError(`global.packages_dir: expected one ${name}_<version>_<arch>.deb in ${dir}, found ${files.length === 0 ? 'none' : files.join(', ')}`);
    }
    const file = path.join(dir, files[0]);
    const version = execFileSync('dpkg-deb', ['--field', file, 'Version'], { encoding: 'utf8' }).trim();
    found.set(name, { name, file, version });
  }
  return found;
}

/** Unpacks a .deb under dir/<name>-<version> once (dpkg-deb -x; no maintainer scripts run). */
export function unpackOnce(pkg: DebPackage, dir: string): string {
  const target = path.join(dir, `${pkg.name}-${pkg.version}`);
  if (existsSync(target)) return target;
  mkdirSync(dir, { recursive: true });
  const partial = `${target}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  execFileSync('dpkg-deb', ['-x', pkg.file, partial]);
  renameSync(partial, target);
  return target;
}

export interface PackageUnit {
  /** The unit file's name: kcm-manager@.service (a template) or kcm-manager.service. */
  fileName: string;
  file: UnitFile;
  /** The unit systemctl starts for an instance ('' for a plain unit). */
  unitFor(instance: string): string;
}

export interface InstalledUnits {
  manager: PackageUnit & { configFile(instance: string): string };
  agent: PackageUnit & { environmentFile: string };
}

function findUnit(unpacked: string, base: string): PackageUnit {
  for (const fileName of [`${base}@.service`, `${base}.service`]) {
    const file = path.join(unpacked, UNIT_DIR, fileName);
    if (!existsSync(file)) continue;
    const template = fileName.includes('@');
    return {
      fileName,
      file: parseUnitFile(readFileSync(file, 'utf8')),
      unitFor: (instance) => (template ? `${base}@${instance}.service` : `${base}.service`),
    };
  }
  throw new PackageError(`the ${base} package has no ${UNIT_DIR}/${base}@.service or ${base}.service`);
}

/** The units of the unpacked manager and agent packages, with the files their ExecStart and EnvironmentFile name. */
export function readPackageUnits(unpacked: { manager: string; agent: string }): InstalledUnits {
  const manager = findUnit(unpacked.manager, 'kcm-manager');
  const agent = findUnit(unpacked.agent, 'kcm-agent');
  const envFiles = unitValues(agent.file, 'Service', 'EnvironmentFile');
  if (envFiles.length !== 1) throw new PackageError(`${agent.fileName}: expected one EnvironmentFile (the agent's address and TLS files), found ${envFiles.length}`);
  return {
    manager: {
      ...manager,
      configFile(instance) {
        const { argv } = serviceCommand({ unit: manager.file, unitName: manager.unitFor(instance), instance, readEnvironmentFile: () => '' });
        const at = argv.indexOf('--config');
        const config = at >= 0 ? argv[at + 1] : argv.find((a) => a.startsWith('--config='))?.slice('--config='.length);
        if (config === undefined || !path.isAbsolute(config)) throw new PackageError(`${manager.fileName}: ExecStart names no absolute --config file`);
        return config;
      },
    },
    agent: { ...agent, environmentFile: envFiles[0].replace(/^-/, '') },
  };
}
