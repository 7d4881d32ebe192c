/**
 * Renders the README's job table from the protocol (job types, aliases, modes, summaries).
 *
 *   npx tsx libs/protocol/scripts/job-table.ts --readme   # rewrite README.md between the job markers
 *
 * libs/protocol/test/job-table.test.ts fails when the README table is stale.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { describeJob } from '../src/describe';
import { JOB_TYPES } from '../src/job-types';
import { REQUIRED_ROLE } from '../src/roles';
import { README_PATH } from './error-table';

export const JOBS_START = '<!-- jobs:start -->';
export const JOBS_END = '<!-- jobs:end -->';

export function renderJobTable(): string {
  const rows = JOB_TYPES.map((t) => {
    const d = describeJob(t)!;
    const aliases = d.aliases.length > 0 ? d.aliases.map((a) => `\`${a}\``).join(', ') : '';
    return `| \`${t}\` | ${aliases} | ${d.mode} | ${REQUIRED_ROLE[t]} | ${d.summary.replace(/\|/g, '\\|')} |`;
  });
  return ['| job_type | also accepted | mode | least role | what it does |', '|---|---|---|---|---|', ...rows].join('\n') + '\n';
}

export function readmeJobSection(readme: string): string | undefined {
  const start = readme.indexOf(JOBS_START);
  const end = readme.indexOf(JOBS_END);
  if (start === -1 || end === -1 || end < start) return undefined;
  return readme.slice(start + JOBS_START.length, end);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href && process.argv.includes('--readme')) {
  const readme = readFileSync(README_PATH, 'utf8');
  const section = readmeJobSection(readme);
  if (section === undefined) throw new Error(`README.md has no ${JOBS_START} ... ${JOBS_END} markers`);
  writeFileSync(README_PATH, readme.replace(JOBS_START + section + JOBS_END, `${JOBS_START}\n${renderJobTable()}${JOBS_END}`));
  console.log('updated README.md job table');
}
