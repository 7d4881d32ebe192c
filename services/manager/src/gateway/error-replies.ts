// Every reply carries the envelope, including the ones fastify would otherwise write itself:
// body too large, unreadable body, unknown route, malformed URL, malformed HTTP.

import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { KcmError, errorReply } from '@kcm/protocol';
import { asKcmError } from './emit-route';
import { clip } from './request-log';


/** A fastify (or thrown) error as the catalog error a client should see. */
export function frameworkErrorToKcm(err: unknown, requestId: string, bodyLimitBytes: number): KcmError {
  if (err instanceof KcmError) return err;
  const fastifyError = err as Partial<FastifyError>;
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return KcmError.of('BODY_TOO_LARGE', `body exceeds the ${bodyLimitBytes}-byte limit`);
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return KcmError.of('BAD_JSON', 'body length does not match the Content-Length header');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return KcmError.of('BAD_JSON', 'body is empty; send a JSON request envelope');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_TYPE':
      return KcmError.of('BAD_JSON', 'body is not a JSON request envelope');
    case 'FST_ERR_BAD_URL':
      return KcmError.of('BAD_ENVELOPE', 'the request URL is malformed');
  }
  // Other client-side failures (aborted upload, bad header) keep fastify's short message;
  // anything else is ours and is masked.
  const status = fastifyError.statusCode ?? 500;
  if (status >= 400 && status < 500 && typeof fastifyError.message === 'string') {
    return KcmError.of('BAD_JSON', clip(fastifyError.message, 200));
  }
  return asKcmError(err, requestId);
}

export function sendNotFound(request: FastifyRequest, reply: FastifyReply): void {
  const err = KcmError.of('NOT_FOUND', `no route ${request.method} ${clip(request.url, 120)}; jobs are sent with POST /HttpService/Emit`);
  void reply.code(404).send(errorReply(err));
}

/**
 * Malformed HTTP never reaches fastify's routing; answer it on the raw socket, still with the
 * envelope, then close (Node's default writes a bare 400).
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const kcmError =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? KcmError.of('HEADERS_TOO_LARGE', 'request headers are too large')
      : KcmError.of('BAD_JSON', 'malformed HTTP request');
  const body = JSON.stringify(errorReply(kcmError));
  // The status line comes from the catalog, so error_code and HTTP status cannot disagree.
  const status = `${kcmError.httpStatus} ${STATUS_CODES[kcmError.httpStatus] ?? ''}`;
  socket.end(
    `HTTP/1.1 ${status}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
