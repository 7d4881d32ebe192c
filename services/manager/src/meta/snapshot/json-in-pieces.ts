// JSON.parse of a large image a piece at a time: the read side of snapshotMetaChunks. At
// fleet scale (43 MB: 1,000 hosts, 1,000 clusters, 100,000 kept jobs) one JSON.parse held
// the event loop for more than an election timeout on a restart or a follower's install.
//
// The bytes are scanned, never decoded whole: in UTF-8 no byte of a multi-byte character
// is ASCII, so quotes, backslashes and brackets are found byte by byte. A container whose
// text is longer than a piece is walked member by member; runs of small members are
// decoded and parsed together (one JSON.parse per piece), so the result is exactly what
// JSON.parse gives, "__proto__" keys included (kept as own properties, as JSON.parse does).

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

/** About this many bytes of image are parsed between two yields: a millisecond or a few. */
export const PARSE_PIECE_BYTES = 64 * 1024;

/**
 * Parses `bytes` (one JSON value) and returns what JSON.parse of its text returns, yielding
 * after about `pieceBytes` of it. Containers are walked member by member down to `depth`
 * levels below the root; a single member deeper than that is parsed in one go.
 * With `walkedObjectsAreDicts` the objects walked member by member have no prototype (a
 * dict, see ../dict.ts): copying one of 100,000 keys into a dict afterwards is a long block.
 */
export function* parseJsonInPieces(
  bytes: Uint8Array,
  depth: number,
  {
    pieceBytes = PARSE_PIECE_BYTES,
    walkedObjectsAreDicts = false,
    onMemberOfWalked,
  }: {
    pieceBytes?: number;
    walkedObjectsAreDicts?: boolean;
    /** Told of each member of a container walked member by member, with the keys that lead to that container ([] for the root). */
    onMemberOfWalked?: (path: readonly string[], value: unknown) => void;
  } = {},
): Generator<void, unknown> {
  const decoder = new TextDecoder();
  let pos = 0;
  let sinceYield = 0;

  const isSpace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
  const skipSpace = (): void => {
    while (pos < bytes.length && isSpace(bytes[pos])) pos++;
  };
  const fail = (what: string): never => {
    throw new SyntaxError(`snapshot image: ${what} at byte ${pos}`);
  };
  const parseText = (from: number, to: number, open = '', close = ''): unknown => JSON.parse(open + decoder.decode(bytes.subarray(from, to)) + close);

  /** The index just past the value starting at `from`, or -1 when it runs past `limit`. */
  function endOfValue(from: number, limit: number): number {
    const stop = Math.min(bytes.length, limit);
    let nesting = 0;
    let i = from;
    while (i < stop) {
      const c = bytes[i];
      if (c === QUOTE) {
        i++;
        while (i < stop && bytes[i] !== QUOTE) i += bytes[i] === BACKSLASH ? 2 : 1;
        if (i >= stop) return -1;
        i++;
        if (nesting === 0) return i;
        continue;
      }
      if (c === OPEN_BRACE || c === OPEN_BRACKET) nesting++;
      else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        if (nesting === 0) return i; // a scalar ended by its container
        nesting--;
        if (nesting === 0) return i + 1;
      } else if (nesting === 0 && (c === COMMA || isSpace(c))) return i;
      i++;
    }
    return stop === bytes.length && nesting === 0 && i > from ? i : -1;
  }

  function* value(levels: number, path: readonly string[]): Generator<void, unknown> {
    skipSpace();
    const start = pos;
    const c = bytes[pos];
    const container = c === OPEN_BRACE || c === OPEN_BRACKET;
    const end = endOfValue(start, container && levels > 0 ? start + pieceBytes : Infinity);
    if (end >= 0) {
      pos = end;
      sinceYield += end - start;
      return parseText(start, end);
    }
    if (!container) return fail('unterminated value');
    return yield* members(levels, c === OPEN_BRACE, path);
  }

  /** A large object or array: small members are parsed in runs, large ones walked (one level down). */
  function* members(levels: number, isObject: boolean, path: readonly string[]): Generator<void, unknown> {
    const target: unknown[] | Record<string, unknown> = isObject ? (walkedObjectsAreDicts ? (Object.create(null) as Record<string, unknown>) : {}) : [];
    const [open, close] = isObject ? ['{', '}'] : ['[', ']'];
    let runStart = -1;
    let runEnd = -1;
    const flushRun = (): void => {
      if (runStart < 0) return;
      const parsed = parseText(runStart, runEnd, open, close);
      if (Array.isArray(target)) {
        for (const v of parsed as unknown[]) {
          target.push(v);
          onMemberOfWalked?.(path, v);
        }
      } else {
        for (const key of Object.keys(parsed as object)) {
          const v = (parsed as Record<string, unknown>)[key];
          setOwn(target, key, v);
          onMemberOfWalked?.(path, v);
        }
      }
      runStart = -1;
    };
    pos++; // past { or [
    skipSpace();
    const closing = isObject ? CLOSE_BRACE : CLOSE_BRACKET;
    if (bytes[pos] === closing) {
      pos++;
      return target;
    }
    for (;;) {
      skipSpace();
      const memberStart = pos;
      let key: string | undefined;
      if (isObject) {
        if (bytes[pos] !== QUOTE) fail('expected a key');
        const keyEnd = endOfValue(pos, Infinity);
        key = parseText(pos, keyEnd) as string;
        pos = keyEnd;
        skipSpace();
        if (bytes[pos] !== COLON) fail('expected ":"');
        pos++;
        skipSpace();
      }
      const valueStart = pos;
      const c = bytes[pos];
      const container = c === OPEN_BRACE || c === OPEN_BRACKET;
      const end = endOfValue(valueStart, container && levels > 1 ? valueStart + pieceBytes : Infinity);
      if (end >= 0) {
        if (runStart < 0) runStart = memberStart;
        runEnd = end;
        sinceYield += end - memberStart;
        pos = end;
      } else {
        flushRun();
        const v = yield* value(levels - 1, [...path, key ?? String(target.length)]);
        if (Array.isArray(target)) target.push(v);
        else setOwn(target, key!, v);
        onMemberOfWalked?.(path, v);
      }
      if (sinceYield >= pieceBytes) {
        flushRun();
        sinceYield = 0;
        yield;
      }
      skipSpace();
      if (bytes[pos] === COMMA) {
        pos++;
        continue;
      }
      if (bytes[pos] !== closing) fail(`expected "," or "${close}"`);
      pos++;
      flushRun();
      return target;
    }
  }

  const result = yield* value(depth, []);
  skipSpace();
  if (pos !== bytes.length) fail('unexpected text after the value');
  return result;
}

/** Stores like JSON.parse does: "__proto__" becomes an own property, never the prototype. */
function setOwn(target: Record<string, unknown>, key: string, v: unknown): void {
  if (key === '__proto__') Object.defineProperty(target, key, { value: v, writable: true, enumerable: true, configurable: true });
  else target[key] = v;
}

/** Runs a generator to its end in one go (the blocking form, for callers that may block). */
export function runToEnd<T>(steps: Generator<void, T>): T {
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/** Runs a generator a few milliseconds at a time, letting the event loop turn between. */
export async function runInTurns<T>(steps: Generator<void, T>, sliceMs = 5): Promise<T> {
  let sliceStart = performance.now();
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    if (performance.now() - sliceStart >= sliceMs) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
  }
}
