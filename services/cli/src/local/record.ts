// <dir>/local.json: what `kcm local up` started, so that `status` and `down` work from any
// shell. Every process is recorded with the argv it was started with; a pid is only ever
// signalled while /proc/<pid>/cmdline still shows that argv (see processes.ts).

import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';

export const RECORD_FILE = 'local.json';
export const RECORD_VERSION = 1;

const processFields = {
  pid: z.number().int().positive(),
  argv: z.array(z.string()).min(1),
  log: z.string(),
};

const managerRecord = z.object({
  index: z.number().int().positive(),
  member: z.string(),
  url: z.string(),
  ...processFields,
});

const agentRecord = z.object({
  index: z.number().int().positive(),
  hostaddr: z.string(),
  port: z.number().int().positive(),
  stateDir: z.string(),
  machineFile: z.string(),
  ...processFields,
});

export const deploymentRecordSchema = z.object({
  version: z.literal(RECORD_VERSION),
  dir: z.string(),
  startedAt: z.string(),
  /** The `up` options that produced this deployment; a restart must use the same group. */
  managerNet: z.string(),
  agentNet: z.string(),
  first: z.number().int(),
  managers: z.array(managerRecord),
  agents: z.array(agentRecord),
});

export type DeploymentRecord = z.infer<typeof deploymentRecordSchema>;
export type ManagerRecord = z.infer<typeof managerRecord>;
export type AgentRecord = z.infer<typeof agentRecord>;

export function recordPath(dir: string): string {
  return path.join(dir, RECORD_FILE);
}

export class RecordError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RecordError';
  }
}

/** Parses local.json text; a malformed file is an error that names the file, never a guess. */
export function parseRecord(text: string, file: string): DeploymentRecord {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new RecordError(`${file} is not JSON (${(err as Error).message}); remove it if nothing from it is running`);
  }
  const parsed = deploymentRecordSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new RecordError(`${file} is not a kcm local record: ${problems}`);
  }
  // Local managers serve HTTPS since issue 34; a record written before names http:// URLs.
  for (const manager of parsed.data.managers) manager.url = manager.url.replace(/^http:\/\//, 'https://');
  return parsed.data;
}

/** The record of the deployment in dir, or undefined when there is none. */
export async function readRecord(dir: string): Promise<DeploymentRecord | undefined> {
  const file = recordPath(dir);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  return parseRecord(text, file);
}

/** Written whole to a temporary file and renamed, so a reader never sees half a record. */
export async function writeRecord(record: DeploymentRecord): Promise<void> {
  await mkdir(record.dir, { recursive: true });
  const file = recordPath(record.dir);
  const partial = `${file}.${process.pid}.tmp`;
  await writeFile(partial, `${JSON.stringify(record, null, 2)}\n`);
  await rename(partial, file);
}
