// Ordered shutdown: parts register a close step as they start; on stop the steps run in
// reverse order (last started, first stopped: stop accepting requests before stopping what
// serves them), each bounded by a timeout so one stuck step cannot hold the process.

import type { Logger } from 'pino';

export interface Shutdown {
  /** Register a step; it runs before every step registered earlier. */
  add(name: string, close: () => Promise<void> | void): void;
  /** Run every step once, in reverse order; later calls return the same promise. */
  run(reason: string): Promise<void>;
}

export function createShutdown(logger: Logger, stepTimeoutMs = 10_000): Shutdown {
  const steps: { name: string; close: () => Promise<void> | void }[] = [];
  let running: Promise<void> | undefined;

  async function runSteps(reason: string): Promise<void> {
    logger.info({ reason }, 'shutting down');
    for (const step of [...steps].reverse()) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), stepTimeoutMs);
      });
      try {
        const outcome = await Promise.race([Promise.resolve().then(step.close), timeout]);
        if (outcome === 'timeout') logger.warn({ step: step.name, timeoutMs: stepTimeoutMs }, 'shutdown step timed out');
      } catch (err) {
        logger.error({ step: step.name, err }, 'shutdown step failed');
      } finally {
        clearTimeout(timer);
      }
    }
  }

  return {
    add(name, close) {
      steps.push({ name, close });
    },
    run(reason) {
      running ??= runSteps(reason);
      return running;
    },
  };
}
