// Reading a member's JSON log lines (pino) and counting job step runs from them.
// The runner logs 'step started' before a step runs and 'step done' after the step's
// result is committed, each with jobId and step; a test counts both per job and step.

import { existsSync, readFileSync } from 'node:fs';

export interface LogLine {
  msg?: string;
  time?: string;
  pid?: number;
  member?: string;
  jobId?: string;
  step?: string;
  [field: string]: unknown;
}

export function readJsonLog(file: string): LogLine[] {
  if (!existsSync(file)) return [];
  const lines: LogLine[] = [];
  for (const text of readFileSync(file, 'utf8').split('\n')) {
    if (!text.startsWith('{')) continue; // tsx warnings, stack traces of a crash
    try {
      lines.push(JSON.parse(text) as LogLine);
    } catch {
      // a line cut short by SIGKILL
    }
  }
  return lines;
}

export interface StepEvent {
  member: string;
  jobId: string;
  step: string;
  kind: 'started' | 'done';
  /** Milliseconds since the epoch (pino's ISO time). */
  at: number;
}

/** Every 'step started' and 'step done' line of the given logs, in time order. */
export function stepEvents(logs: { member: string; lines: LogLine[] }[]): StepEvent[] {
  const events: StepEvent[] = [];
  for (const { member, lines } of logs) {
    for (const l of lines) {
      if ((l.msg !== 'step started' && l.msg !== 'step done') || !l.jobId || !l.step) continue;
      events.push({ member, jobId: l.jobId, step: l.step, kind: l.msg === 'step done' ? 'done' : 'started', at: Date.parse(String(l.time)) });
    }
  }
  return events.sort((a, b) => a.at - b.at);
}

export interface StepCount {
  started: number;
  done: number;
  /** 'step started' lines written after the step's 'step done' (a committed step re-run). */
  startedAfterDone: number;
  startedBy: string[];
}

/** Per `jobId/step`: how often it started, how often it committed, and re-runs after commit. */
export function countSteps(events: StepEvent[]): Map<string, StepCount> {
  const counts = new Map<string, StepCount>();
  for (const e of events) {
    const key = `${e.jobId}/${e.step}`;
    const c = counts.get(key) ?? { started: 0, done: 0, startedAfterDone: 0, startedBy: [] };
    if (e.kind === 'started') {
      c.started++;
      c.startedBy.push(e.member);
      if (c.done > 0) c.startedAfterDone++;
    } else {
      c.done++;
    }
    counts.set(key, c);
  }
  return counts;
}

/**
 * The step of `jobId` that a SIGKILL of `member` at `at` (ms since the epoch) cut, or
 * undefined when the kill cut none: the member had logged 'step started' for the step and
 * no 'step done' before it died, and the step was started again after the kill (by the
 * next leader; a step whose result had committed is never run again). A soak that names
 * the step it kills in asserts this, so a kill that came too late fails the run.
 */
export function stepCutByKill(events: StepEvent[], kill: { member: string; jobId: string; at: number }): string | undefined {
  const ofJob = events.filter((e) => e.jobId === kill.jobId);
  const before = ofJob.filter((e) => e.member === kill.member && e.at <= kill.at);
  const running = before.filter((e) => e.kind === 'started' && !before.some((d) => d.kind === 'done' && d.step === e.step && d.at >= e.at)).at(-1);
  if (!running) return undefined;
  return ofJob.some((e) => e.kind === 'started' && e.step === running.step && e.at >= kill.at) ? running.step : undefined;
}
