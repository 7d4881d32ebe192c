import { describe, expect, it } from 'vitest';
import { SshTransport, type CommandRunner } from '../../src/deploy/ssh-transport';
import { parseUnitFile } from '../../src/deploy/systemd-unit';

function recorder(answers: (argv: readonly string[]) => number = () => 0) {
  const calls: Array<{ argv: string[]; stdin?: string }> = [];
  const run: CommandRunner = async (argv, stdin) => {
    calls.push({ argv: [...argv], ...(stdin && stdin.length > 0 ? { stdin: stdin.toString() } : {}) });
    return { code: answers(argv), stdout: Buffer.from('installed 0.2.0'), stderr: '' };
  };
  return { calls, run };
}

const managerUnit = { fileName: 'kcm-manager@.service', file: parseUnitFile('[Service]\nExecStart=/usr/bin/kcm-manager\n'), unitFor: (i: string) => `kcm-manager@${i}.service` };

describe('ssh transport: the commands it would run on a host', () => {
  it('copies a package with scp and installs it with sudo dpkg -i, in batch mode', async () => {
    const { calls, run } = recorder();
    await new SshTransport('10.0.0.11', 'admin', run).install({ name: 'kcm-manager', file: '/dist/kcm-manager_0.2.0_all.deb', version: '0.2.0' });
    expect(calls.map((c) => c.argv)).toEqual([
      ['ssh', '-o', 'BatchMode=yes', 'admin@10.0.0.11', '--', 'mkdir -p /tmp/kcm-deploy'],
      ['scp', '-o', 'BatchMode=yes', '-q', '/dist/kcm-manager_0.2.0_all.deb', 'admin@10.0.0.11:/tmp/kcm-deploy/kcm-manager_0.2.0_all.deb'],
      ['ssh', '-o', 'BatchMode=yes', 'admin@10.0.0.11', '--', 'sudo dpkg -i /tmp/kcm-deploy/kcm-manager_0.2.0_all.deb'],
      ['ssh', '-o', 'BatchMode=yes', 'admin@10.0.0.11', '--', 'rm -f /tmp/kcm-deploy/kcm-manager_0.2.0_all.deb'],
    ]);
  });

  it('writes a file through sudo install from stdin with its mode and owner; the content never enters a command line', async () => {
    const { calls, run } = recorder();
    await new SshTransport('10.0.0.11', undefined, run).writeFile({ path: '/etc/kcm/secrets.key', content: Buffer.from("s3cr'et"), mode: 0o600, owner: 'kcm' });
    expect(calls).toEqual([{ argv: ['ssh', '-o', 'BatchMode=yes', '10.0.0.11', '--', 'sudo install -D -m 0600 -o kcm -g kcm /dev/stdin /etc/kcm/secrets.key'], stdin: "s3cr'et" }]);
  });

  it('makes a manager\'s data directory owned by kcm, as the daemon cannot under / itself', async () => {
    const { calls, run } = recorder();
    await new SshTransport('10.0.0.11', 'admin', run).makeDirectory({ path: '/srv/kcm manager', mode: 0o700, owner: 'kcm' });
    expect(calls[0].argv.at(-1)).toBe("sudo install -d -m 0700 -o kcm -g kcm '/srv/kcm manager'");
  });

  it('starts a unit with systemctl enable --now and asks is-active to know it runs', async () => {
    const { calls, run } = recorder((argv) => (argv.at(-1)!.includes('is-active') ? 3 : 0));
    const t = new SshTransport('10.0.0.12', 'admin', run);
    expect(await t.isRunning({ unit: managerUnit, instance: 'm2' })).toBe(false);
    await t.start({ unit: managerUnit, instance: 'm2' });
    expect(calls.map((c) => c.argv.at(-1))).toEqual(['systemctl is-active --quiet kcm-manager@m2.service', 'sudo systemctl enable --now kcm-manager@m2.service']);
  });

  it('reads the installed version from dpkg-query; a path with spaces or quotes is quoted for the remote shell', async () => {
    const { calls, run } = recorder();
    const t = new SshTransport('10.0.0.11', 'admin', run);
    expect(await t.installedVersion('kcm-agent')).toBe('0.2.0');
    await t.readFile("/etc/kcm/it's here");
    expect(calls[1].argv.at(-1)).toBe(`sudo cat '/etc/kcm/it'\\''s here'`);
  });
});
