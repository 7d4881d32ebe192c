// @kcm/common: small on purpose. Logger, environment configuration, shutdown ordering.
export { createLogger, flushLog, flushLogSoon, silentLogger, isLogLevel } from './logger';
export type { Logger, LoggerOptions } from './logger';
export { ConfigError, envString, envInt, envList, isLoopbackHost } from './config';
export type { Env } from './config';
export { createShutdown } from './shutdown';
export type { Shutdown } from './shutdown';
export { PipelinedStream, PipelineError } from './pipelined-stream';
export type { BatchDuplex, PipelineOptions } from './pipelined-stream';
export { OWNER_ONLY_UMASK, useOwnerOnlyUmask, makePrivateDirSync, makeDirWithMode } from './private-files';
export { CALLS_STARTED_PER_TURN, eachAtMost, startInSlices } from './concurrency';
export { ONE_SHOT_MYSQL_OPTIONS } from './mysql-connections';
export { assetPath, isReleaseBundle } from './assets';
export type { AssetFolder } from './assets';
export { EXIT_CONFIG, EXIT_USAGE, checkPort, exitWithConfigError, helpText, parseCommandLine, runCommandLine, versionLine } from './command-line';
export type { CommandLineOutcome, CommandSpec, OptionSpec, OptionValues } from './command-line';
export { KCM_PROTOCOL, KCM_PROTOCOL_OLDEST, KCM_VERSION, PROTOCOL_METADATA_KEY, VERSION_METADATA_KEY, protocolRefusal, readPeerProtocol } from './kcm-protocol';
export type { PeerProtocol, ProtocolParty } from './kcm-protocol';
