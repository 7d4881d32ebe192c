// build() returns the app; the manager's main listens, tests call app.inject().

import type { X509Certificate } from 'node:crypto';
import type { Server as TlsServer } from 'node:tls';
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Registry } from 'prom-client';
import { errorReply, KcmError } from '@kcm/protocol';
import { createLogger, type Logger } from '@kcm/common';
import type { JobService } from './job-service';
import { authenticate, INSECURE_IDENTITY, requestIdentity, setRequestIdentity, type EmitAuth } from './auth';
import type { Identity } from '@kcm/protocol';
import { registerJsonBodyParser } from './json-body';
import { createEmitMetrics } from './metrics';
import { REQUEST_ID_HEADER, emitRecordOf, findEmitRecord, logEmit, recordEmit, requestIdFor } from './request-log';
import { answerEmit, echoFields, errorAnswer } from './emit-route';
import { answerClientError, frameworkErrorToKcm, sendNotFound } from './error-replies';
import { RateLimiter, type RateLimitOptions } from './rate-limit';
import { drainThen, oversizeToDrain } from './oversize-body';
import { registerConsole } from './console';
import { loadHttpsPair, refusePlainHttp, type HttpsFiles, type HttpsPair } from './https-listener';
import { HttpsCertificateReloader } from './https-reload';
import type { TokenMinter } from './token-issue';

export const EMIT_PATH = '/HttpService/Emit';
export const DEFAULT_BODY_LIMIT_BYTES = 1024 * 1024;

export interface GatewayOptions {
  service: JobService;
  /** Defaults to a pino logger named "gateway" on stdout. */
  logger?: Logger;
  /** Largest accepted Emit body; larger ones get BODY_TOO_LARGE (HTTP 413). Default 1 MiB. */
  bodyLimitBytes?: number;
  /** How Emit requests are authenticated: by bearer token, or (explicitly) not at all. */
  auth: EmitAuth;
  /** This member's name, recorded with each submission as where it was received. */
  member?: string;
  /** Where /metrics reads from; a fresh registry when absent. */
  registry?: Registry;
  /** Emit requests per second per caller (rate-limit.ts). Absent: no limit. */
  rateLimit?: RateLimitOptions;
  /** Why this member cannot serve (e.g. it stopped applying the metadata log): /healthz answers 503 with it. Absent or undefined: healthy. */
  unhealthy?: () => { status: string; reason: string } | undefined;
  /** Makes the token a create_token without token_sha256 answers with (token-issue.ts). Default: random. */
  mintToken?: TokenMinter;
  /**
   * Serve HTTPS with these files, reloaded when they change, and refuse plain HTTP on the
   * port (https-listener.ts). Absent: plain HTTP. `configKey` names where they came from.
   */
  https?: HttpsOptions;
}

export function buildGateway(options: GatewayOptions): FastifyInstance {
  const logger = options.logger ?? createLogger({ name: 'gateway' });
  const bodyLimitBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const metrics = createEmitMetrics(options.registry);
  const auth = options.auth;
  if ('insecure' in auth) logger.warn('Emit authentication is OFF (insecure mode): every caller is served as an admin');
  // Read before anything listens: a missing or mismatched file fails the start, naming it.
  const served = options.https ? loadHttpsPair(options.https.files, options.https.configKey) : undefined;

  const app = Fastify({
    ...(served ? { https: { cert: served.cert, key: served.key } } : {}),
    loggerInstance: logger,
    genReqId: requestIdFor,
    // One line per Emit comes from the route's onResponse hook instead of fastify's two.
    logController: new LogController({ requestIdLogLabel: 'request_id', disableRequestLogging: true }),
    // request.log is the gateway's logger itself, not a child bound to the request id per
    // request (that child cost a member 2-3% of its CPU under load): the few lines logged
    // about a request name its request_id themselves.
    childLoggerFactory: (parent) => parent,
    bodyLimit: bodyLimitBytes,
    // fastify's own 503-while-closing reply has no envelope; in-flight keep-alive requests are served instead.
    return503OnClosing: false,
    clientErrorHandler: answerClientError,
    frameworkErrors: (err, request, reply) => {
      // Typed for route generics that do not apply here; it is a plain reply.
      void (reply as FastifyReply).code(400).send(errorReply(frameworkErrorToKcm(err, String(request.id), bodyLimitBytes)));
    },
  }) as unknown as FastifyInstance;

  registerJsonBodyParser(app, bodyLimitBytes);
  if (served && options.https) serveHttpsOnly(app, options.https, served, logger, options.member ?? '');

  // Hooks take a done callback rather than being async: an async hook costs a promise per request.
  app.addHook('onRequest', (request, reply, done) => {
    void reply.header(REQUEST_ID_HEADER, request.id);
    done();
  });

  app.setErrorHandler((err, request, reply) => {
    const kcmError = frameworkErrorToKcm(err, String(request.id), bodyLimitBytes);
    if (kcmError.errorName === 'INTERNAL') request.log.error({ err, request_id: request.id }, 'unexpected gateway error');
    // A failure after the route answered (e.g. an attachment that cannot be serialised) keeps the job type it knew.
    const known = findEmitRecord(request);
    const answer = errorAnswer(kcmError, known?.sentJobType ?? '', known?.jobId ?? '');
    recordEmit(request, answer.record);
    void reply.code(answer.httpStatus).send(answer.reply);
  });
  app.setNotFoundHandler(sendNotFound);

  const limiter = new RateLimiter(options.rateLimit ?? { ratePerSecond: 0, burst: 1 });
  app.post(EMIT_PATH, {
    // Before the body is read: an unauthenticated client cannot make us parse a megabyte.
    onRequest: (request, reply, done) => {
      const outcome = authenticate(auth, request.headers.authorization);
      if ('identity' in outcome) {
        setRequestIdentity(request, outcome.identity);
        const waitMs = limiter.take(rateKeyOf(request, outcome.identity));
        if (waitMs === 0 && oversizeToDrain(request.raw, bodyLimitBytes) !== undefined) {
          const tooLarge = errorAnswer(KcmError.of('BODY_TOO_LARGE', `body exceeds the ${bodyLimitBytes}-byte limit`), '', '');
          recordEmit(request, tooLarge.record);
          drainThen(request.raw, () => void reply.code(tooLarge.httpStatus).send(tooLarge.reply));
          return;
        }
        if (waitMs === 0) {
          done();
          return;
        }
        const limit = `more than ${options.rateLimit?.ratePerSecond} requests/s from ${outcome.identity === INSECURE_IDENTITY ? 'this address' : `token ${outcome.identity.name}`}`;
        const refused = errorAnswer(KcmError.of('OVERLOADED', `request rate limit: ${limit} (emitRatePerSecond); retry in ${waitMs} ms`), '', '');
        recordEmit(request, refused.record);
        void reply.code(refused.httpStatus).header('retry-after', String(Math.ceil(waitMs / 1000))).send(refused.reply);
        return;
      }
      const answer = errorAnswer(KcmError.of('UNAUTHENTICATED', outcome.refusal), '', '');
      recordEmit(request, answer.record);
      void reply.code(answer.httpStatus).header('www-authenticate', 'Bearer').send(answer.reply);
    },
    onResponse: (request, reply, done) => {
      const record = emitRecordOf(request);
      metrics.observe(record.jobTypeLabel, record.outcome, reply.elapsedTime / 1000);
      logEmit(request, reply, record, reply.elapsedTime);
      done();
    },
    handler: async (request, reply) => {
      const answer = await answerEmit(request.body, options.service, String(request.id), (err) =>
        request.log.error({ err, request_id: request.id, job_type: echoFields(request.body).sentJobType.slice(0, 64) }, 'job service failed'),
        { requestId: String(request.id), identity: requestIdentity(request), clientAddress: request.ip, receivedBy: options.member },
        options.mintToken,
      );
      recordEmit(request, answer.record);
      return reply.code(answer.httpStatus).send(answer.reply);
    },
  });

  app.get('/metrics', async (_request, reply) => {
    return reply.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  app.get('/healthz', async (_request, reply) => {
    const unhealthy = options.unhealthy?.();
    return unhealthy ? reply.code(503).send(unhealthy) : { status: 'ok' };
  });
  // The web console: static files, no token needed to load them; its data comes from Emit like any client's.
  registerConsole(app);

  return app;
}

/** Whom a request's rate is counted against: its token's name, or its address when no token names the caller (insecure mode). */
function rateKeyOf(request: FastifyRequest, identity: Identity): string {
  return identity === INSECURE_IDENTITY ? `address:${request.ip}` : `token:${identity.name}`;
}

export interface HttpsOptions {
  files: HttpsFiles;
  /** The config key the files came from (`https` or `tls`), named in errors and warnings. */
  configKey: string;
  /** How often the files are stat'ed besides the directory watch (https-reload.ts). */
  reloadCheckMs?: number;
  /** Told how to read the certificate served now (for its expiry on /metrics). */
  onServing?: (current: () => X509Certificate) => void;
}

/** Plain HTTP refused on the port, and the certificate reloaded from disk while the gateway runs. */
function serveHttpsOnly(app: FastifyInstance, opts: HttpsOptions, served: HttpsPair, logger: Logger, member: string): void {
  const server = app.server as unknown as TlsServer;
  refusePlainHttp(server, `https://${member || '<this member>'}`);
  const reloader = new HttpsCertificateReloader({ server, files: opts.files, served, configKey: opts.configKey, logger, checkMs: opts.reloadCheckMs });
  reloader.start();
  app.addHook('onClose', (_instance, done) => {
    reloader.stop();
    done();
  });
  opts.onServing?.(() => reloader.current.x509);
}
