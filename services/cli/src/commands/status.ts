// kcm status <job_id> [--wait]: where an async job is; with --wait, follow it to the end.

import type { ReplyEnvelope } from '@kcm/protocol';
import { EXIT, UsageError, type CliIo } from '../io';
import { plainProgressView, statusLine, ttyProgressView } from '../progress';
import { waitForJob, type WaitOutcome } from '../wait';
import { statusHelp } from '../help';
import { buildEnvelope, connect, CONNECTION_OPTIONS, parseFlags, printResult, reportReply, secondsFlag, WAIT_OPTIONS, writeJson, type Connection } from './shared';

export const DEFAULT_INTERVAL_MS = 1000;

/** Print a job's state (and its result when done); exit 0 unless it failed. */
export function reportStatus(reply: ReplyEnvelope, io: CliIo, json: boolean): number {
  return reportReply(reply, io, json, () => {
    io.stdout.write(`${statusLine(reply)}\n`);
    if (reply.status === 'done') printResult(reply, io);
  });
}

/** Follow a job with a progress bar (TTY) or plain lines, then report how it ended. */
export async function followJob(
  connection: Connection,
  jobId: string,
  io: CliIo,
  flags: { interval?: string; timeout?: string },
  command: string,
): Promise<number> {
  const intervalMs = secondsFlag(flags.interval, 'interval', DEFAULT_INTERVAL_MS, command);
  const timeoutMs = secondsFlag(flags.timeout, 'timeout', 0, command);
  // With --json stdout carries only the final reply; progress goes to stderr as plain lines.
  const view = connection.json ? plainProgressView(io.stderr) : io.stdout.isTTY ? ttyProgressView(io.stdout) : plainProgressView(io.stdout);
  const outcome = await waitForJob(connection.client, jobId, io, { intervalMs, timeoutMs, view });
  return reportWaitOutcome(outcome, jobId, io, connection.json, timeoutMs);
}

function reportWaitOutcome(outcome: WaitOutcome, jobId: string, io: CliIo, json: boolean, timeoutMs: number): number {
  if (outcome.kind === 'timedOut') {
    if (json && outcome.last) writeJson(io, outcome.last);
    io.stderr.write(`kcm: gave up waiting for job ${jobId} after ${timeoutMs / 1000}s; it may still finish (kcm status ${jobId} --wait)\n`);
    return EXIT.timedOut;
  }
  // The last status line is already shown; what is left is the result or the error.
  return reportReply(outcome.reply, io, json, () => printResult(outcome.reply, io));
}

export async function statusCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(args, { ...CONNECTION_OPTIONS, ...WAIT_OPTIONS }, 'status');
  if (values.help) {
    io.stdout.write(statusHelp());
    return EXIT.ok;
  }
  if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? 'status needs a job id' : `status takes one job id, got ${positionals.length}`, 'kcm status --help');
  const jobId = positionals[0];
  const connection = connect(values, io, 'status');
  if (values.wait) return followJob(connection, jobId, io, values, 'status');
  const { reply } = await connection.client.emit(buildEnvelope('get_status', {}, io, { jobId }));
  return reportStatus(reply, io, connection.json);
}
