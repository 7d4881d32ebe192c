// The HTTPS certificate renewed on disk without a restart. Both files' directories are
// watched (fs.watch: a renewal tool's write or rename shows within a debounce), and a stat of
// both every few seconds catches what a watch misses (a directory replaced, a network
// filesystem). On a change the pair is read and checked (loadHttpsPair) and, only when it is
// whole, handed to the server's setSecureContext: new connections get the new certificate,
// open ones keep theirs as TLS does. A half-written pair, a key of another certificate or an
// unreadable file is logged once and the served certificate stays, so a tool that writes the
// two files one after the other is safe: the pair is taken once both are written.

import { readFileSync, statSync, watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import type { Server as TlsServer } from 'node:tls';
import { filesSignature } from '@kcm/agent-api';
import type { Logger } from '@kcm/common';
import { loadHttpsPair, type HttpsFiles, type HttpsPair } from './https-listener';

/** How often both files are stat'ed besides the watch. */
export const HTTPS_RELOAD_CHECK_MS = 5_000;
/** A change is looked at once the files have been quiet this long (a tool writes them in several calls). */
export const HTTPS_RELOAD_DEBOUNCE_MS = 250;

export interface HttpsReloadOptions {
  server: TlsServer;
  files: HttpsFiles;
  /** The pair the server was built with. */
  served: HttpsPair;
  /** The config key the files came from (https or tls), named in warnings. */
  configKey: string;
  logger: Logger;
  checkMs?: number;
  debounceMs?: number;
}

export type ReloadOutcome = 'unchanged' | 'reloaded' | 'refused';

function readBoth(files: HttpsFiles): string {
  try {
    return `${readFileSync(files.cert, 'latin1')}\0${readFileSync(files.key, 'latin1')}`;
  } catch {
    return 'unreadable';
  }
}

export class HttpsCertificateReloader {
  private pair: HttpsPair;
  /** The bytes last looked at, good or not: a bad pair is reported once, not at every check. */
  private lookedAt: string;
  private signature: string;
  private readonly watchers: FSWatcher[] = [];
  private timer: NodeJS.Timeout | undefined;
  private debounce: NodeJS.Timeout | undefined;

  constructor(private readonly opts: HttpsReloadOptions) {
    this.pair = opts.served;
    this.lookedAt = `${opts.served.cert.toString('latin1')}\0${opts.served.key.toString('latin1')}`;
    this.signature = filesSignature([opts.files.cert, opts.files.key]);
  }

  /** The certificate new connections are served now. */
  get current(): HttpsPair {
    return this.pair;
  }

  start(): void {
    if (this.timer) return;
    const names = new Set([path.basename(this.opts.files.cert), path.basename(this.opts.files.key)]);
    for (const dir of new Set([path.dirname(this.opts.files.cert), path.dirname(this.opts.files.key)])) {
      try {
        const watcher = watch(dir, { persistent: false }, (_event, name) => {
          if (name === null || names.has(String(name))) this.soon();
        });
        watcher.on('error', (err) => this.opts.logger.warn({ dir, err: err.message }, 'HTTPS certificate directory watch failed; the files are still checked every few seconds'));
        this.watchers.push(watcher);
      } catch (err) {
        this.opts.logger.warn({ dir, err: (err as Error).message }, 'cannot watch the HTTPS certificate directory; the files are still checked every few seconds');
      }
    }
    this.timer = setInterval(() => {
      const signature = filesSignature([this.opts.files.cert, this.opts.files.key]);
      if (signature === this.signature) return;
      this.signature = signature;
      this.soon();
    }, this.opts.checkMs ?? HTTPS_RELOAD_CHECK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    clearTimeout(this.debounce);
    this.timer = undefined;
    for (const watcher of this.watchers.splice(0)) watcher.close();
  }

  private soon(): void {
    clearTimeout(this.debounce);
    this.debounce = setTimeout(() => this.checkNow(), this.opts.debounceMs ?? HTTPS_RELOAD_DEBOUNCE_MS);
    this.debounce.unref();
  }

  /** Looks at the files now: serves them when they changed and form a good pair. */
  checkNow(): ReloadOutcome {
    this.signature = filesSignature([this.opts.files.cert, this.opts.files.key]);
    const bytes = readBoth(this.opts.files);
    if (bytes === this.lookedAt) return 'unchanged';
    this.lookedAt = bytes;
    const { files, configKey, logger, server } = this.opts;
    let next: HttpsPair;
    try {
      next = loadHttpsPair(files, configKey);
      server.setSecureContext({ cert: next.cert, key: next.key });
    } catch (err) {
      logger.warn(
        { err: err instanceof Error ? err.message : String(err), serving_serial: this.pair.x509.serialNumber },
        'HTTPS certificate files changed but are not used; the served certificate stays',
      );
      return 'refused';
    }
    const old = this.pair.x509;
    this.pair = next;
    logger.info(
      { cert: files.cert, serial: next.x509.serialNumber, not_after: next.x509.validTo, previous_serial: old.serialNumber },
      'HTTPS certificate reloaded',
    );
    return 'reloaded';
  }
}
