/**
 * get_status (spec 4.1). The task it asks about is the envelope's `job_id` (checked by the
 * envelope, not here); paras is `{}`.
 */
import { z } from 'zod';

export const getStatusParas = z.object({});
