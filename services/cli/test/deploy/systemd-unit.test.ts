import { describe, expect, it } from 'vitest';
import { parseUnitFile, serviceCommand, splitCommandLine, UnitFileError } from '../../src/deploy/systemd-unit';
import { runsCommand, LocalRootTransport } from '../../src/deploy/local-root-transport';

const MANAGER_UNIT = `[Unit]
Description=kcm manager member %i
[Service]
User=kcm
ExecStart=/usr/bin/kcm-manager --config /etc/kcm/manager-%i.json
StateDirectory=kcm/manager
`;

const AGENT_UNIT = `[Service]
EnvironmentFile=-/etc/kcm/agent.env
ExecStart=/usr/bin/kcm-agent --host \${KCM_AGENT_HOST} --state-dir /var/lib/kcm/agent $EXTRA
`;

describe('systemd unit reading for the local-root transport', () => {
  it('expands the instance specifier in ExecStart as systemd does', () => {
    const cmd = serviceCommand({ unit: parseUnitFile(MANAGER_UNIT), unitName: 'kcm-manager@m2.service', instance: 'm2', readEnvironmentFile: () => undefined });
    expect(cmd.argv).toEqual(['/usr/bin/kcm-manager', '--config', '/etc/kcm/manager-m2.json']);
    expect(cmd.user).toBe('kcm');
  });

  it('takes variables from the EnvironmentFile; a bare $VAR splits into words', () => {
    const cmd = serviceCommand({
      unit: parseUnitFile(AGENT_UNIT),
      unitName: 'kcm-agent.service',
      readEnvironmentFile: (file) => (file === '/etc/kcm/agent.env' ? 'KCM_AGENT_HOST=10.0.0.21\n# comment\nEXTRA="--a 1"\n' : undefined),
    });
    expect(cmd.argv).toEqual(['/usr/bin/kcm-agent', '--host', '10.0.0.21', '--state-dir', '/var/lib/kcm/agent', '--a', '1']);
    expect(cmd.env.get('KCM_AGENT_HOST')).toBe('10.0.0.21');
  });

  it('an unset variable or an unsupported specifier is an error naming it, not an empty word', () => {
    expect(() => splitCommandLine('/bin/x ${NOPE}', new Map())).toThrow(/\$\{NOPE\}/);
    expect(() => serviceCommand({ unit: parseUnitFile('[Service]\nExecStart=/bin/x %h\n'), unitName: 'x.service', readEnvironmentFile: () => undefined })).toThrow(UnitFileError);
  });

  it('moves kcm\'s paths under the root and leaves the machine\'s own (node, engines) alone', () => {
    const t = new LocalRootTransport('/r/m1');
    expect(t.rooted('/etc/kcm/manager-m1.json')).toBe('/r/m1/etc/kcm/manager-m1.json');
    expect(t.rooted('/var/lib/kcm/agent')).toBe('/r/m1/var/lib/kcm/agent');
    expect(t.rooted('/usr/bin/kcm-agent')).toBe('/r/m1/usr/bin/kcm-agent');
    expect(t.rooted('/usr/bin/node')).toBe('/usr/bin/node');
    expect(t.rooted('/r/m1/etc/kcm/x')).toBe('/r/m1/etc/kcm/x');
  });

  it('a script started through its #! line is still recognised as the daemon started, and nothing else is', () => {
    const started = ['/r/usr/bin/kcm-agent', '--state-dir', '/r/var/lib/kcm/agent'];
    expect(runsCommand(started, started)).toBe(true);
    expect(runsCommand(started, ['node', '/r/usr/bin/kcm-agent', '--state-dir', '/r/var/lib/kcm/agent'])).toBe(true);
    expect(runsCommand(started, ['node', '/other/kcm-agent', '--state-dir', '/r/var/lib/kcm/agent'])).toBe(false);
    expect(runsCommand(started, ['vim', '/r/var/lib/kcm/agent'])).toBe(false);
  });
});
