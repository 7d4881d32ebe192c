import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { README_PATH } from '../scripts/error-table';
import { readmeJobSection, renderJobTable } from '../scripts/job-table';
import { JOB_TYPES } from '../src/job-types';

describe('README job table', () => {
  it('lists every job type with its aliases and mode, as the protocol defines them', () => {
    const section = readmeJobSection(readFileSync(README_PATH, 'utf8'));
    expect(section, 'README.md must have the job table markers').toBeDefined();
    expect(section!.trim()).toBe(renderJobTable().trim());
    for (const t of JOB_TYPES) expect(section).toContain(`\`${t}\``);
  });
});
