// The manager's HTTP gateway: POST /HttpService/Emit, /metrics, /healthz, the web console at /ui/.
export { buildGateway, EMIT_PATH, DEFAULT_BODY_LIMIT_BYTES } from './build-gateway';
export type { GatewayOptions } from './build-gateway';
export type { JobService, JobStatusView, SubmitContext } from './job-service';
export { authenticate, tokenDigest, INSECURE_IDENTITY } from './auth';
export type { EmitAuth, TokenLookup } from './auth';
export { MAX_JSON_NESTING } from './json-body';
export { CONSOLE_PATH } from './console';
export { requestBoundTokens, randomTokens } from './token-issue';
export type { TokenMinter, TokenRequest } from './token-issue';
export type { HttpsOptions } from './build-gateway';
export { emitListenerOf, loadHttpsPair, HttpsCertificateError } from './https-listener';
export type { EmitListener, HttpsFiles } from './https-listener';
