// Waiting for an async job: poll get_status until done or failed, showing progress.
//
// Progress comes from the `progress` field of an ongoing job's attachment (kcm's addition:
// the spec has polling only, no events).
// Shape read here (numbers may also arrive as decimal strings):
//   { step: k, steps: n, step_name: "copy_rows", done?: 500, total?: 1000, unit?: "rows" }
// A person at a terminal sees one redrawn bar; logs and pipes get a plain line per change.

import type { JobProgressAttachment, ReplyEnvelope } from '@kcm/protocol';
import type { CliOutput } from './io';

export interface JobProgress {
  step?: number;
  steps?: number;
  stepName?: string;
  done?: number;
  total?: number;
  unit?: string;
}

function toNumber(value: unknown): number | undefined {
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  return typeof n === 'number' && Number.isFinite(n) ? n : undefined;
}

/** Fields of the protocol's JobProgressAttachment, read defensively: the reply comes off the wire. */
type WireProgress = { [K in keyof JobProgressAttachment['progress']]?: unknown };

export function progressOf(attachment: Record<string, unknown> | null): JobProgress | undefined {
  const raw = attachment?.progress;
  if (typeof raw !== 'object' || raw === null) return undefined;
  const p = raw as WireProgress;
  return {
    step: toNumber(p.step),
    steps: toNumber(p.steps),
    stepName: typeof p.step_name === 'string' ? p.step_name : undefined,
    done: toNumber(p.done),
    total: toNumber(p.total),
    unit: typeof p.unit === 'string' ? p.unit : undefined,
  };
}

/** Share of the whole job finished, 0..1, when the progress says enough to tell. */
export function fractionDone(p: JobProgress): number | undefined {
  if (p.step === undefined || p.steps === undefined || p.steps <= 0) return undefined;
  const withinStep = p.done !== undefined && p.total !== undefined && p.total > 0 ? Math.min(1, p.done / p.total) : 0;
  return Math.min(1, Math.max(0, (p.step - 1 + withinStep) / p.steps));
}

/** "step 2/3 copy_rows, 500/1000 rows" (parts that are unknown are left out). */
export function describeProgress(p: JobProgress): string {
  const parts: string[] = [];
  if (p.step !== undefined) parts.push(p.steps !== undefined ? `step ${p.step}/${p.steps}` : `step ${p.step}`);
  if (p.stepName) parts.push(p.stepName);
  let text = parts.join(' ');
  if (p.done !== undefined) {
    const units = p.total !== undefined ? `${p.done}/${p.total}` : `${p.done}`;
    text += `${text ? ', ' : ''}${units}${p.unit ? ` ${p.unit}` : ''}`;
  }
  return text;
}

/** One line about a job's state: "job 7 create_cluster: ongoing, step 2/3 copy_rows, 500/1000 rows". */
export function statusLine(reply: ReplyEnvelope): string {
  const name = reply.job_type ? ` ${reply.job_type}` : '';
  const progress = progressOf(reply.attachment);
  const detail = progress ? describeProgress(progress) : '';
  return `job ${reply.job_id}${name}: ${reply.status}${detail ? `, ${detail}` : ''}`;
}

const BAR_WIDTH = 24;

export function progressBar(fraction: number | undefined): string {
  if (fraction === undefined) return `[${'.'.repeat(BAR_WIDTH)}]`;
  const filled = Math.round(fraction * BAR_WIDTH);
  return `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${String(Math.floor(fraction * 100)).padStart(3)}%`;
}

export interface ProgressView {
  /** Called with every get_status reply while the job runs. */
  update(reply: ReplyEnvelope): void;
  /** A note between polls (e.g. the manager is unreachable, retrying). */
  note(text: string): void;
  /** Called once with the terminal reply, before the result is printed. */
  finish(reply: ReplyEnvelope): void;
}

/** Plain lines, one per change of state or progress: for pipes, CI logs and files. */
export function plainProgressView(out: CliOutput): ProgressView {
  let last = '';
  return {
    update(reply) {
      const line = statusLine(reply);
      if (line !== last) out.write(`${line}\n`);
      last = line;
    },
    note(text) {
      out.write(`${text}\n`);
    },
    finish(reply) {
      this.update(reply);
    },
  };
}

/** One bar redrawn in place: for a person at a terminal. */
export function ttyProgressView(out: CliOutput): ProgressView {
  const clearLine = '\r\x1b[2K';
  const draw = (reply: ReplyEnvelope) => {
    const p = progressOf(reply.attachment);
    const fraction = reply.status === 'done' ? 1 : p ? fractionDone(p) : undefined;
    let line = `${progressBar(fraction)} ${statusLine(reply)}`;
    // A pseudo-terminal without a size reports 0 columns; assume a common width then.
    const columns = out.columns !== undefined && out.columns >= 40 ? out.columns : 100;
    if (line.length > columns - 1) line = line.slice(0, columns - 2) + '…';
    out.write(clearLine + line);
  };
  return {
    update: draw,
    note(text) {
      out.write(`${clearLine}${text}\n`);
    },
    finish(reply) {
      draw(reply);
      out.write('\n');
    },
  };
}
