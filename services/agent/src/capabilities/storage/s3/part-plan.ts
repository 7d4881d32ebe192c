// How big each part of a multipart upload is, when the stream's length is not known ahead
// (a backup stream ends when mariabackup does). S3 allows at most 10,000 parts per object and
// parts of 5 MiB to 5 GiB (all but the last at least 5 MiB); parts may differ in size. So the
// part size grows with the part number: PARTS_PER_STEP parts of the base size, then the same
// number of twice that, and so on, capped at 5 GiB. With the default 8 MiB base, 1000 parts
// per step: the first 8 GB go in 8 MiB parts, and the 10,000 parts hold ~8 TiB, more than S3's
// 5 TiB object limit: no stream S3 can store runs out of parts.

export const MIN_PART_BYTES = 5 * 1024 * 1024;
export const MAX_PART_BYTES = 5 * 1024 * 1024 * 1024;
export const MAX_PARTS = 10_000;
export const DEFAULT_BASE_PART_BYTES = 8 * 1024 * 1024;
const PARTS_PER_STEP = 1000;

export interface PartPlan {
  /** Size of parts 1..PARTS_PER_STEP; doubles every PARTS_PER_STEP parts. */
  baseBytes: number;
}

/** S3's largest object. */
export const MAX_OBJECT_BYTES = 5 * 1024 ** 4;

/**
 * The plan. A base below S3's 5 MiB minimum is refused (a real S3 would fail the completion),
 * and so is one whose 10,000 parts hold less than S3's 5 TiB object (5 MiB itself: 4.9 TiB).
 */
export function partPlan(baseBytes = DEFAULT_BASE_PART_BYTES): PartPlan {
  if (!Number.isInteger(baseBytes) || baseBytes < MIN_PART_BYTES || baseBytes > MAX_PART_BYTES) {
    throw new Error(`part size ${baseBytes} must be an integer from ${MIN_PART_BYTES} (5 MiB) to ${MAX_PART_BYTES} (5 GiB)`);
  }
  const plan = { baseBytes };
  if (planCapacity(plan) < MAX_OBJECT_BYTES) throw new Error(`part size ${baseBytes}: its ${MAX_PARTS} parts would hold less than S3's 5 TiB object`);
  return plan;
}

/** The size of part `partNumber` (1-based) when the stream goes on past it. */
export function partBytes(plan: PartPlan, partNumber: number): number {
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > MAX_PARTS) throw new Error(`part number ${partNumber} must be 1..${MAX_PARTS}`);
  const step = Math.floor((partNumber - 1) / PARTS_PER_STEP);
  return Math.min(MAX_PART_BYTES, plan.baseBytes * 2 ** step);
}

/** How many bytes the 10,000 parts of the plan hold in all. */
export function planCapacity(plan: PartPlan): number {
  let total = 0;
  for (let n = 1; n <= MAX_PARTS; n += PARTS_PER_STEP) total += partBytes(plan, n) * Math.min(PARTS_PER_STEP, MAX_PARTS - n + 1);
  return total;
}
