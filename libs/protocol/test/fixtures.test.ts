import { describe, expect, it } from 'vitest';
import { JOB_TYPES, parseRequest } from '../src/index';
import { fixtureNames, loadFixture } from './fixtures';

describe('request fixtures (test/fixtures/emit)', () => {
  it('hold exactly one request per canonical job type, named after it', () => {
    expect(fixtureNames()).toEqual([...JOB_TYPES].sort());
  });

  for (const jobType of JOB_TYPES) {
    it(`${jobType}: the fixture is accepted and resolves to its own job type`, () => {
      const body = loadFixture(jobType);
      expect(body.job_type).toBe(jobType);
      const result = parseRequest(body);
      if (!result.ok) throw new Error(`fixture ${jobType} rejected: ${result.error.message}`);
      expect(result.request.jobType).toBe(jobType);
      expect(result.request.sentJobType).toBe(jobType);
    });
  }
});
