// The web console (issue 19): static files served by every manager at /ui/ on the gateway's
// port. It is only a client of the public Emit API: the page asks for a token, keeps it in
// the browser's sessionStorage, and sends it as a bearer token with the same queries the
// CLI sends. So serving the files needs no token and there is no endpoint here that reads
// any state. No build step: the page is plain ES modules, and its one library, lit-html
// (templates that escape every interpolated value), is served from node_modules as it is
// published, found by the page through an import map.

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';
import { assetPath, isReleaseBundle } from '@kcm/common';

export const CONSOLE_PATH = '/ui/';
const CONSOLE_DIR = assetPath('console');
const LIT_HTML_PATH = `${CONSOLE_PATH}vendor/lit-html/`;

/**
 * The published lit-html package directory (its browser build sits at its top level). A
 * release bundle has no node_modules for it: the build copies the package to console/lit-html/.
 */
function litHtmlDir(): string {
  if (isReleaseBundle()) return assetPath('console', 'lit-html');
  let dir = path.dirname(createRequire(import.meta.url).resolve('lit-html'));
  // Node resolves the package's "node" build (<package>/node/...): walk up to the package itself.
  while (path.basename(dir) !== 'lit-html' && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return dir;
}

/**
 * The page's Content-Security-Policy: scripts only from this origin plus the one inline
 * script, the import map, by its hash; no plugins, no framing, requests only to this origin.
 * A server-supplied string that slipped past the templates still could not run as script.
 */
function contentSecurityPolicy(indexHtml: string): string {
  const importMap = /<script type="importmap">([\s\S]*?)<\/script>/.exec(indexHtml)?.[1];
  if (importMap === undefined) throw new Error('console/index.html has no import map');
  const hash = createHash('sha256').update(importMap, 'utf8').digest('base64');
  return [
    "default-src 'self'",
    `script-src 'self' 'sha256-${hash}'`,
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
    "form-action 'none'",
  ].join('; ');
}

export function registerConsole(app: FastifyInstance): void {
  const csp = contentSecurityPolicy(readFileSync(path.join(CONSOLE_DIR, 'index.html'), 'utf8'));
  app.register(fastifyStatic, {
    root: CONSOLE_DIR,
    prefix: CONSOLE_PATH,
    // The files change with the code: revalidate each load (an ETag answers 304 when unchanged).
    cacheControl: false,
    setHeaders: (res) => {
      res.setHeader('cache-control', 'no-cache');
      res.setHeader('content-security-policy', csp);
      res.setHeader('x-content-type-options', 'nosniff');
      res.setHeader('referrer-policy', 'no-referrer');
    },
  });
  app.register(fastifyStatic, {
    root: litHtmlDir(),
    prefix: LIT_HTML_PATH,
    decorateReply: false,
    allowedPath: (pathName) => pathName.endsWith('.js'),
    maxAge: 3_600_000,
  });
  app.get('/ui', (_request, reply) => reply.redirect(CONSOLE_PATH));
}
