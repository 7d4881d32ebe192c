// The job registry is exhaustive by construction: a job type added to libs/protocol as
// async, with its paras schema and result type but no runner, must fail to compile in
// services/manager/src/jobs/registry.ts. This compiles the registry with the TypeScript
// compiler twice: as it is (no error), and with the protocol grown by one job type (an
// in-memory overlay of three protocol files); the second must report the missing entry.

import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '../../../..');
const protocolSrc = path.join(root, 'libs/protocol/src');
const registryFile = path.join(root, 'services/manager/src/jobs/registry.ts');

/** A new async job type, added where the protocol's own checks ask for it. */
const growProtocol: Record<string, (source: string) => string> = {
  [path.join(protocolSrc, 'job-types.ts')]: (s) =>
    // Anchored on raft_mission's lines, not on the end of the lists, so types appended after it do not break the fixture.
    replaceOnce(replaceOnce(s, "  'raft_mission',\n", "  'raft_mission',\n  'backup_shard',\n"), "  raft_mission: 'async',\n", "  raft_mission: 'async',\n  backup_shard: 'async',\n"),
  [path.join(protocolSrc, 'paras/index.ts')]: (s) => replaceOnce(s, '  raft_mission: raftMissionParas,\n', '  raft_mission: raftMissionParas,\n  backup_shard: noParas,\n'),
  [path.join(protocolSrc, 'results.ts')]: (s) => replaceOnce(s, '  raft_mission: RaftMissionResult;\n', '  raft_mission: RaftMissionResult;\n  backup_shard: EmptyResult;\n'),
};

function replaceOnce(source: string, from: string, to: string): string {
  if (!source.includes(from)) throw new Error(`fixture out of date: ${JSON.stringify(from)} not found`);
  return source.replace(from, to);
}

let previous: ts.Program | undefined;

/** Type errors in the registry file, with `overlay` applied to file contents (the rest is `npm run typecheck`'s). */
function registryErrors(overlay: Record<string, (source: string) => string>): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(path.join(root, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  if (!config) throw new Error('tsconfig.json could not be read');
  const host = ts.createCompilerHost(config.options);
  const readFile = host.readFile.bind(host);
  host.readFile = (file) => {
    const text = readFile(file);
    const change = overlay[path.resolve(file)] ?? overlay[ts.sys.realpath?.(file) ?? file];
    return text !== undefined && change ? change(text) : text;
  };
  // The second compile reuses the first one's unchanged files (parsing node_modules' types dominates).
  const program = ts.createProgram({ rootNames: [registryFile], options: config.options, host, oldProgram: previous });
  previous = program;
  const registry = program.getSourceFile(registryFile)!;
  return [...program.getSyntacticDiagnostics(registry), ...program.getSemanticDiagnostics(registry)].map((d) => {
    const where = d.file ? `${path.relative(root, d.file.fileName)}: ` : '';
    return where + ts.flattenDiagnosticMessageText(d.messageText, '\n');
  });
}

describe('the job registry', () => {
  it('compiles as it is: every async job type of the protocol has its entry', () => {
    expect(registryErrors({})).toEqual([]);
  }, 60_000);

  it('fails to compile when the protocol gains an async job type the registry does not list', () => {
    const errors = registryErrors(growProtocol);
    expect(errors.length).toBeGreaterThan(0);
    for (const error of errors) expect(error).toMatch(/^services\/manager\/src\/jobs\/registry\.ts: .*Property 'backup_shard' is missing in type .* but required in type 'JobTable'/s);
  }, 60_000);
});
