// kcm scale-out --agent: the new agent entry is added to the topology file itself (its
// comments and layout kept), so the file stays the one description of the deployment, and
// the whole result is checked before anything is written: a bad entry is refused naming
// its key (agents[3].cores) and the file is left as it was.

import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parse, parseDocument } from 'yaml';
import { parseTopology, TopologyFileError } from './topology-file';

/** Adds the agent (a YAML mapping, e.g. `{host: 10.0.0.24, cores: 8, memory_mb: 32768}`) and returns its host. */
export function addAgentToTopologyFile(file: string, mappingText: string): string {
  let entry: unknown;
  try {
    entry = parse(mappingText);
  } catch (err) {
    throw new TopologyFileError('--agent', `not YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw new TopologyFileError('--agent', 'must be a mapping such as "{host: 10.0.0.24, cores: 8, memory_mb: 32768}"');
  const text = readFileSync(file, 'utf8');
  const doc = parseDocument(text);
  if (doc.has('agents')) doc.addIn(['agents'], doc.createNode(entry));
  else doc.set('agents', doc.createNode([entry]));
  // lineWidth 0: flow entries (`- { host: ..., root: ... }`) stay on their one line, as the operator wrote them.
  const updated = doc.toString({ lineWidth: 0 });
  const topology = parseTopology(updated, path.dirname(file)); // throws naming agents[n].<key>
  const host = topology.agents[topology.agents.length - 1].host;
  const partial = `${file}.${process.pid}.tmp`;
  writeFileSync(partial, updated);
  renameSync(partial, file);
  return host;
}
