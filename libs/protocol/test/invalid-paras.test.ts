import { describe, expect, it } from 'vitest';
import { JOB_TYPES, parseRequest } from '../src/index';
import { loadFixture } from './fixtures';
import { INVALID_VARIANTS, type VariantKind } from './invalid-variants';

const EXPECTED_VARIANT_COUNT = 258;
const KINDS: VariantKind[] = ['missing', 'type', 'format'];

describe('every job type rejects its invalid variants, naming the field', () => {
  for (const jobType of JOB_TYPES) {
    describe(jobType, () => {
      for (const variant of INVALID_VARIANTS[jobType]) {
        it(`rejects ${variant.what} (${variant.kind}) with ${variant.code} naming ${variant.field}`, () => {
          const body = loadFixture(jobType);
          variant.mutate(body);
          const result = parseRequest(body);
          if (result.ok) throw new Error(`accepted: ${JSON.stringify(body.paras)}`);
          expect(result.error.errorName).toBe(variant.code);
          expect(result.error.message).toContain(`${variant.field}: `);
          expect(result.error.field).toBe(variant.field);
        });
      }
    });
  }
});

describe('the invalid-variant table', () => {
  it('covers a missing field, a wrong type or enum, and a broken format or cross-field rule for every job type', () => {
    const gaps = JOB_TYPES.flatMap((jobType) =>
      KINDS.filter((kind) => !INVALID_VARIANTS[jobType].some((v) => v.kind === kind)).map((kind) => `${jobType}: ${kind}`),
    );
    expect(gaps).toEqual([]);
    const total = JOB_TYPES.reduce((n, jobType) => n + INVALID_VARIANTS[jobType].length, 0);
    console.log(`invalid variants: ${total} across ${JOB_TYPES.length} job types`);
    expect(total).toBeGreaterThanOrEqual(3 * JOB_TYPES.length);
    // The exact count guards against variants silently falling out of the table; update it when adding some.
    expect(total).toBe(EXPECTED_VARIANT_COUNT);
  });
});
