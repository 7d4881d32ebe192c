// How kcm deploy reaches a host. Two implementations with one contract:
//   ssh-transport.ts        a real host: ssh/scp, `sudo dpkg -i`, `systemctl enable --now`
//   local-root-transport.ts a directory on this machine standing for the host's /, the
//                           packages unpacked into it with dpkg-deb -x and each daemon started
//                           as its unit's ExecStart would (tests and loopback demos)
// Paths given to a transport are the host's paths as the plan computed them (for local-root
// already under the root).

import type { HostDirectory, HostFile } from './host-plan';
import type { DebPackage, PackageUnit } from './package-units';

export interface UnitToStart {
  unit: PackageUnit;
  instance: string;
}

export interface HostTransport {
  /** For messages: `ssh admin@10.0.0.11`, `local-root /tmp/x/m1`. */
  readonly describe: string;
  /** The version of a package installed on the host, undefined when it is not installed. */
  installedVersion(pkg: DebPackage['name']): Promise<string | undefined>;
  install(pkg: DebPackage): Promise<void>;
  /** A file's bytes on the host, undefined when it does not exist. */
  readFile(file: string): Promise<Buffer | undefined>;
  /** Makes the directory and its missing parents (root-owned), with its mode. */
  makeDirectory(dir: HostDirectory): Promise<void>;
  /** Writes the file (parents created), with its mode and owner. */
  writeFile(file: HostFile): Promise<void>;
  /** True while the unit's daemon runs. */
  isRunning(start: UnitToStart): Promise<boolean>;
  /** Enables and starts the unit (a running one is left as it is). */
  start(start: UnitToStart): Promise<void>;
  stop(start: UnitToStart): Promise<void>;
}
