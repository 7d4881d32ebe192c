// The console's only way to the manager: POST /HttpService/Emit on the origin that served
// the page, with the token as a bearer token, exactly as the CLI sends it.

import { envelope, refusalText } from './format.js';

export const EMIT_PATH = '/HttpService/Emit';

/** A reply that is not a success: an HTTP error (401, 403, 503, ...) or an error_code other than 0. */
export class EmitRefused extends Error {
  constructor(httpStatus, reply, jobType) {
    super(refusalText(httpStatus, reply, jobType));
    this.name = 'EmitRefused';
    this.httpStatus = httpStatus;
    this.jobType = jobType;
    this.errorCode = reply?.error_code ?? '';
  }
}

/** Runs a sync query and resolves with its attachment. */
export async function query(jobType, paras, token) {
  const response = await fetch(EMIT_PATH, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(envelope(jobType, paras)),
    cache: 'no-store',
    credentials: 'omit',
  });
  let reply = null;
  try {
    reply = await response.json();
  } catch {
    reply = null;
  }
  if (!response.ok || reply === null || String(reply.error_code) !== '0') throw new EmitRefused(response.status, reply, jobType);
  return reply.attachment ?? {};
}
