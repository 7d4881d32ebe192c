// Closed by default: a manager or an agent starts with mutual TLS, or with plaintext links
// only when told so explicitly (`insecure: true` / `--insecure`), with a warning on every
// start. Called first thing by both entry points, before anything binds a port.

import { useInsecure, useTls } from '../credentials';
import { loadTlsMaterial, TlsMaterialError, type TlsFiles, type TlsMaterial, type TlsRole } from './material';

export interface TlsStartOptions {
  role: TlsRole;
  files: Partial<TlsFiles> | undefined;
  insecure: boolean;
  /** Where the insecure warning goes (the process's logger). */
  warn(message: string): void;
}

/** Where each role's operator names the files, in the words of its own config or command line. */
const WHERE_TLS_IS_SET: Record<TlsRole, string> = {
  manager: '(tls.ca, tls.cert, tls.key in the config), or set insecure: true explicitly',
  agent: '(--tls-ca, --tls-cert, --tls-key, or KCM_AGENT_TLS_CA, _CERT, _KEY), or start with --insecure explicitly',
};

/** Configures this process's links; throws TlsMaterialError naming what is missing or wrong. */
export function startTls(opts: TlsStartOptions): TlsMaterial | undefined {
  const files = opts.files ?? {};
  const named = (['ca', 'cert', 'key'] as const).filter((k) => files[k]);
  if (opts.insecure) {
    if (named.length > 0) throw new TlsMaterialError(`insecure is set together with TLS files (${named.join(', ')}): choose one`);
    useInsecure();
    opts.warn(`INSECURE: this ${opts.role} runs without TLS: anyone who reaches its ports can call every RPC. Use it only on a closed test host.`);
    return undefined;
  }
  const missing = (['ca', 'cert', 'key'] as const).filter((k) => !files[k]);
  if (missing.length > 0) {
    throw new TlsMaterialError(`TLS is required: name the ${missing.join(', ')} file${missing.length > 1 ? 's' : ''} ${WHERE_TLS_IS_SET[opts.role]}`);
  }
  const material = loadTlsMaterial(files as TlsFiles, opts.role);
  // Renewed files are picked up without a restart (reloading.ts); a bad renewal is logged and not used.
  useTls(material, { warn: opts.warn });
  return material;
}
