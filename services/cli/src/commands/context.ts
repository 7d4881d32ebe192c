// kcm context list | use <name> | show [name]: the named manager groups of the context file
// (context-file.ts), which `kcm deploy` and `kcm local up` fill in.

import { EXIT, UsageError, type CliIo } from '../io';
import { contextFilePath, loadContext, readContextFile, useContext, type KcmContext } from '../context-file';
import { renderTable } from '../tables';
import { parseFlags, writeJson } from './shared';

export function contextHelp(): string {
  return [
    'Usage: kcm context list | use <name> | show [name]   [--json]',
    '',
    'The context file names manager groups: their endpoints, the CA their HTTPS certificates',
    'are signed by, and the file holding the token. A command with no --url uses the current',
    'context (or --context <name>, env KCM_CONTEXT). kcm deploy and kcm local up write it.',
    '',
    '  list          every context; * marks the current one',
    '  use <name>    make <name> the current context',
    '  show [name]   one context (default: the current one)',
    '',
    'File: $KCM_CONFIG, else ~/.config/kcm/config.json (mode 0600):',
    '  { "current": "prod", "contexts": { "prod": { "endpoints": ["https://10.0.0.1:58000"], "ca": "ca.pem", "token_file": "admin.token" } } }',
    '',
  ].join('\n');
}

function asRow(ctx: KcmContext, current: string | undefined) {
  return { current: ctx.name === current ? '*' : '', name: ctx.name, endpoints: ctx.endpoints.join(','), ca: ctx.caFile ?? '', token_file: ctx.tokenFile ?? '' };
}

export async function contextCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(args, { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, 'context');
  if (values.help) {
    io.stdout.write(contextHelp());
    return EXIT.ok;
  }
  const file = contextFilePath(io.env);
  const [action, name, ...extra] = positionals;
  if (extra.length > 0) throw new UsageError(`context ${action} takes at most one name, got ${positionals.slice(1).join(' ')}`, 'kcm context --help');
  switch (action) {
    case 'list': {
      if (name !== undefined) throw new UsageError('context list takes no name', 'kcm context --help');
      const { current, contexts } = readContextFile(file);
      const rows = [...contexts.values()].map((ctx) => asRow(ctx, current));
      if (values.json) writeJson(io, rows);
      else io.stdout.write(rows.length === 0 ? `no contexts in ${file}\n` : `${renderTable(rows)}\n`);
      return EXIT.ok;
    }
    case 'use': {
      if (name === undefined) throw new UsageError('context use needs a context name', 'kcm context --help');
      const ctx = useContext(name, file);
      io.stdout.write(`current context: ${ctx.name} (${ctx.endpoints.join(', ')})\n`);
      return EXIT.ok;
    }
    case 'show': {
      const ctx = loadContext(name, file);
      if (!ctx) {
        io.stderr.write(`kcm: no current context in ${file}; kcm context use <name>, or give --url\n`);
        return EXIT.failed;
      }
      const row = asRow(ctx, readContextFile(file).current);
      if (values.json) writeJson(io, row);
      else io.stdout.write(`name: ${ctx.name}${row.current ? ' (current)' : ''}\nendpoints: ${ctx.endpoints.join(', ')}\nca: ${ctx.caFile ?? '- (the system CAs)'}\ntoken_file: ${ctx.tokenFile ?? '-'}\nfile: ${file}\n`);
      return EXIT.ok;
    }
    default:
      throw new UsageError(action === undefined ? 'context needs list, use or show' : `unknown context action "${action}"; use list, use or show`, 'kcm context --help');
  }
}
