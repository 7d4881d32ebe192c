/**
 * get_status (spec 4.1). The task it asks about is the envelope's `job_id` (checked by the
 * envelope, not here); paras is `{}`.
 */
import { z } from 'zod';
import { idString, integerString } from '../formats';

export const getStatusParas = z.object({});

/** cancel_job (beyond the spec): the job to stop, as get_status names it. */
export const cancelJobParas = z.object({
  job_id: idString(),
});

/** list_jobs (beyond the spec): the `limit` newest jobs the history keeps. */
export const listJobsParas = z.object({
  limit: integerString(1, 1000).optional(),
});
