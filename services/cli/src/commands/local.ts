// kcm local up/down/status: runs a manager group and agents on loopback addresses
// (DESIGN.md section 6). NOT IMPLEMENTED YET: a later issue adds it here. Until then it says
// so and exits 2 rather than pretending to start anything.

import { EXIT, type CliIo } from '../io';

export const LOCAL_SUBCOMMANDS = ['up', 'down', 'status'] as const;

export function localHelp(): string {
  return [
    'Usage: kcm local <up|down|status>',
    '',
    'Run a local kcm on loopback addresses: managers on 127.0.1.x, agents on 127.0.2.x.',
    '  up       start the manager group and agents',
    '  down     stop them',
    '  status   show what is running',
    '',
    'Not implemented yet: a later issue adds it.',
    '',
  ].join('\n');
}

export async function localCommand(args: string[], io: CliIo): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    io.stdout.write(localHelp());
    return EXIT.ok;
  }
  const what = args[0] ? `kcm local ${args[0]}` : 'kcm local';
  io.stderr.write(`kcm: ${what} is not implemented yet (a later issue adds local up/down/status)\n`);
  return EXIT.usage;
}
