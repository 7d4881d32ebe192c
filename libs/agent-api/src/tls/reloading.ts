// Certificates renewed on disk without a restart. The process's TLS files are checked every
// few seconds (a stat of each); when one changed, all three are loaded and checked again with
// loadTlsMaterial, and only a set that passes replaces the one in use: a half-copied
// certificate, a key of another certificate or a foreign CA is refused with a warning and the
// old material stays until the files are right. Renewal tools that write the three files one
// by one are therefore safe: the set is taken once it is whole.
//
// grpc-js (>= 1.10) builds servers and channels on a CertificateProvider (its experimental
// API): a server switches its secure context (http2 setSecureContext) and a channel makes
// each new connection with the latest one. So new connections present the new certificate,
// and connections already open keep theirs until they close, as TLS does.

import { statSync } from 'node:fs';
import type * as grpc from '@grpc/grpc-js';
import { loadTlsMaterial, type TlsMaterial } from './material';

type CaListener = grpc.experimental.CaCertificateUpdateListener;
type IdentityListener = grpc.experimental.IdentityCertificateUpdateListener;

/** How often the files are looked at; a stat of three files. */
export const TLS_RELOAD_CHECK_MS = 5_000;

export interface ReloadOptions {
  checkMs?: number;
  /** A set of files that does not load (the old material stays in use). */
  warn?(message: string): void;
  /** A new set is in use. */
  reloaded?(material: TlsMaterial): void;
}

/** Identity of the files' current versions (inode, size, mtime of each): changes when one is written or replaced. */
export function filesSignature(files: readonly string[]): string {
  return files
    .map((file) => {
      try {
        const st = statSync(file);
        return `${st.ino}:${st.size}:${st.mtimeMs}`;
      } catch {
        return 'missing';
      }
    })
    .join('|');
}

const tlsFilesOf = (m: TlsMaterial) => [m.files.ca, m.files.cert, m.files.key];

export class ReloadingTlsMaterial implements grpc.experimental.CertificateProvider {
  private readonly caListeners = new Set<CaListener>();
  private readonly identityListeners = new Set<IdentityListener>();
  private signature: string;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private material: TlsMaterial,
    private readonly opts: ReloadOptions = {},
  ) {
    this.signature = filesSignature(tlsFilesOf(material));
  }

  get current(): TlsMaterial {
    return this.material;
  }

  /** Starts looking at the files (the timer does not keep the process alive). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.checkNow(), this.opts.checkMs ?? TLS_RELOAD_CHECK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Loads the files when they changed since the last look; true when a new set is now in use. */
  checkNow(): boolean {
    const signature = filesSignature(tlsFilesOf(this.material));
    if (signature === this.signature) return false;
    // Looked at once per change: a set that does not load is reported once, not every few seconds.
    this.signature = signature;
    let next: TlsMaterial;
    try {
      next = loadTlsMaterial(this.material.files, this.material.role);
    } catch (err) {
      this.opts.warn?.(`TLS files changed but are not used (the certificate in use stays): ${err instanceof Error ? err.message : String(err)}`);
      return false;
    }
    this.material = next;
    for (const listener of this.caListeners) listener(this.caUpdate());
    for (const listener of this.identityListeners) listener(this.identityUpdate());
    this.opts.reloaded?.(next);
    return true;
  }

  private caUpdate(): grpc.experimental.CaCertificateUpdate {
    return { caCertificate: this.material.caPem };
  }

  private identityUpdate(): grpc.experimental.IdentityCertificateUpdate {
    return { certificate: this.material.certPem, privateKey: this.material.keyPem };
  }

  // grpc-js adds its listener before its own watcher is in place, so the first update is
  // delivered on the next tick (as its FileWatcherCertificateProvider does).
  addCaCertificateListener(listener: CaListener): void {
    this.caListeners.add(listener);
    process.nextTick(() => this.caListeners.has(listener) && listener(this.caUpdate()));
  }

  removeCaCertificateListener(listener: CaListener): void {
    this.caListeners.delete(listener);
  }

  addIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.add(listener);
    process.nextTick(() => this.identityListeners.has(listener) && listener(this.identityUpdate()));
  }

  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.delete(listener);
  }
}
