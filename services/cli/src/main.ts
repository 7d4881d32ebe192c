// kcm: the command line client. main(argv, io) is the whole program with its world
// injected, so tests run it in-process; the bottom of this file wires the real process.

import { existsSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { versionLine } from '@kcm/common';
import { TransportError } from './http-client';
import { EXIT, UsageError, processIo, type CliIo } from './io';
import { topHelp } from './help';
import { emitCommand } from './commands/emit';
import { statusCommand } from './commands/status';
import { getCommand } from './commands/get';
import { localCommand } from './commands/local';
import { auditCommand } from './commands/audit';
import { deployCommand, displayCommand, memberCommand, scaleOutCommand } from './commands/deploy';
import { contextCommand } from './commands/context';
import { ContextFileError } from './context-file';

const COMMANDS: Record<string, (args: string[], io: CliIo) => Promise<number>> = {
  emit: emitCommand,
  status: statusCommand,
  get: getCommand,
  // `kcm local up/down/status`: a local manager group and agents on loopback (see commands/local.ts).
  local: localCommand,
  // `kcm audit` lists the audit trail; `kcm audit verify --data-dir` checks its chain offline.
  audit: auditCommand,
  // `kcm context list|use|show`: the named manager groups of the context file (context-file.ts).
  context: contextCommand,
  // A real deployment from one topology file (docs/install.md): deploy, display, scale-out, member replace.
  deploy: deployCommand,
  display: displayCommand,
  'scale-out': scaleOutCommand,
  member: memberCommand,
};

export async function main(argv: string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === undefined) {
      io.stderr.write(topHelp());
      return EXIT.usage;
    }
    if (command === '--help' || command === '-h' || command === 'help') {
      if (rest[0] && Object.hasOwn(COMMANDS, rest[0])) return await COMMANDS[rest[0]]([...rest.slice(1), '--help'], io);
      io.stdout.write(topHelp());
      return EXIT.ok;
    }
    if (command === '--version' || command === 'version') {
      io.stdout.write(`${versionLine('kcm')}\n`);
      return EXIT.ok;
    }
    if (!Object.hasOwn(COMMANDS, command)) {
      const hint = command.startsWith('-') ? `"${command}" must come after a command` : `unknown command "${command}"`;
      throw new UsageError(`${hint}; commands: ${Object.keys(COMMANDS).join(', ')}`);
    }
    return await COMMANDS[command](rest, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`kcm: ${err.message}\nRun '${err.helpHint}' for usage.\n`);
      return EXIT.usage;
    }
    if (err instanceof ContextFileError) {
      // One line naming the file and the field; the file is the user's to fix, not a bug.
      io.stderr.write(`kcm: ${err.message}\n`);
      return EXIT.usage;
    }
    if (err instanceof TransportError) {
      io.stderr.write(`kcm: ${err.message}\n`);
      return EXIT.unreachable;
    }
    io.stderr.write(`kcm: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return EXIT.failed;
  }
}

/** Runs kcm as the process's command: `tsx services/cli/src/main.ts ...` or the `kcm` bin (bin/kcm.js). */
export async function runAsCommand(): Promise<void> {
  // Ctrl-C while a progress bar is drawn: end its line so the shell prompt starts clean.
  // The job itself keeps running on the managers.
  process.once('SIGINT', () => {
    if (process.stdout.isTTY) process.stdout.write('\n');
    process.exit(130);
  });
  process.exitCode = await main(process.argv.slice(2), processIo());
}

/** True when this file is the program run: `tsx .../main.ts`, or the release bundle, also through
 * the /usr/bin/kcm symlink (argv[1] is the link; import.meta.url the file it points to). */
function runAsProgram(): boolean {
  const script = process.argv[1];
  if (!script || !existsSync(script)) return false;
  return realpathSync(script) === fileURLToPath(import.meta.url);
}

if (runAsProgram()) await runAsCommand();
