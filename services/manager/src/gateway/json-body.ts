// Emit bodies are parsed as JSON whatever their Content-Type says: the spec's clients post
// with `curl -d '{...}'`, which labels the body application/x-www-form-urlencoded, and a
// gateway that answered those with 415 would reject the reference system's own examples.
// A body that is not JSON gets the BAD_JSON envelope (HTTP 400), never a bare fastify error.
//
// Parsing itself uses fastify's secure JSON parser (rejects __proto__ / constructor.prototype
// keys). Before it, the raw text is scanned for nesting depth: JSON.parse copes with 100k
// levels, but anything that later walks the value recursively (JSON.stringify in a log line
// or an error message, schema validation) would overflow the stack. No request needs more
// than a handful of levels (envelope -> paras -> rb_nodes -> entry).

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { KcmError } from '@kcm/protocol';

export const MAX_JSON_NESTING = 64;

/**
 * The deepest nesting of objects/arrays in `text`, counting stops once it passes `limit`.
 * Brackets inside strings do not count. Linear time, constant space, no recursion.
 */
export function jsonNestingDepth(text: string, limit = Number.POSITIVE_INFINITY): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      // Jump over the string: most of a large body is string content, and indexOf is far
      // faster than stepping through it. A quote preceded by an odd run of backslashes is escaped.
      let end = i;
      for (;;) {
        end = text.indexOf('"', end + 1);
        if (end === -1) return deepest; // unterminated: the JSON parser reports it
        let backslashes = 0;
        while (text.charCodeAt(end - 1 - backslashes) === 0x5c /* \ */) backslashes++;
        if (backslashes % 2 === 0) break;
      }
      i = end;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      depth++;
      if (depth > deepest) {
        deepest = depth;
        if (deepest > limit) return deepest;
      }
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
    }
  }
  return deepest;
}

/** Why `text` is not JSON, in the words of the JSON parser (for the error_info). */
function syntaxProblem(text: string): string {
  try {
    JSON.parse(text);
    // Plain JSON.parse accepts it, so the secure parser refused a prototype key.
    return 'body contains a forbidden "__proto__" or "constructor.prototype" key';
  } catch (err) {
    return `body is not valid JSON: ${(err as Error).message}`;
  }
}

/** Replace fastify's parsers with one that treats every Emit body as JSON text. */
export function registerJsonBodyParser(app: FastifyInstance, bodyLimitBytes: number): void {
  const secureParse = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: bodyLimitBytes }, (request: FastifyRequest, body, done) => {
    const text = String(body);
    if (text.trim() === '') {
      done(KcmError.of('BAD_JSON', 'body is empty; send a JSON request envelope'), undefined);
      return;
    }
    const depth = jsonNestingDepth(text, MAX_JSON_NESTING);
    if (depth > MAX_JSON_NESTING) {
      done(KcmError.of('BAD_JSON', `body nests objects/arrays deeper than ${MAX_JSON_NESTING} levels`), undefined);
      return;
    }
    secureParse(request, text, (err, value) => {
      if (err) done(KcmError.of('BAD_JSON', syntaxProblem(text)), undefined);
      else done(null, value);
    });
  });
}
