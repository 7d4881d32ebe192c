import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOG, errorEntryByCode, KcmError } from '../src/index';
import { ERRORS_DOC_PATH, README_PATH, readmeErrorSection, renderErrorDoc, renderErrorTable } from '../scripts/error-table';

const REGENERATE = 'run: npx tsx libs/protocol/scripts/error-table.ts --readme';

describe('error catalog', () => {
  it('has unique codes and unique names, and 0 is OK', () => {
    const codes = ERROR_CATALOG.map((e) => e.code);
    const names = ERROR_CATALOG.map((e) => e.name);
    expect(new Set(codes).size).toBe(codes.length);
    expect(new Set(names).size).toBe(names.length);
    expect(ERROR_CATALOG.find((e) => e.code === 0)?.name).toBe('OK');
  });

  it('holds the errors the gateway, jobs and CLI rely on, with their HTTP statuses', () => {
    const status = Object.fromEntries(ERROR_CATALOG.map((e) => [e.name, e.httpStatus]));
    expect(status).toMatchObject({
      OK: 200, BAD_JSON: 400, BAD_ENVELOPE: 400, UNKNOWN_JOB_TYPE: 200, INVALID_PARAS: 200, NOT_FOUND: 200, CONFLICT: 200,
      NO_RESOURCES: 200, UNSUPPORTED: 200, BODY_TOO_LARGE: 413, NO_LEADER: 503, UNAUTHENTICATED: 401, FORBIDDEN: 403,
      AGENT_UNREACHABLE: 200, INSTANCE_FAILED: 200, TIMEOUT: 200, DATA_CHECK_FAILED: 200, CANCELED: 200, INTERNAL: 500,
    });
    expect(status.OVERLOADED).toBeDefined();
  });

  it('gives every entry a meaning', () => {
    for (const e of ERROR_CATALOG) expect(e.meaning.length, e.name).toBeGreaterThan(10);
  });

  it('builds KcmError from a name with code, HTTP status, field and cause', () => {
    const cause = new Error('ECONNREFUSED');
    const err = KcmError.of('AGENT_UNREACHABLE', 'agent 127.0.2.1:58100 did not answer', { field: 'paras.hostaddr', cause });
    expect(err).toBeInstanceOf(Error);
    expect(err).toMatchObject({ name: 'KcmError', errorName: 'AGENT_UNREACHABLE', code: 2000, httpStatus: 200, field: 'paras.hostaddr', cause });
    expect(KcmError.is(err, 'AGENT_UNREACHABLE')).toBe(true);
    expect(KcmError.is(err, 'TIMEOUT')).toBe(false);
    expect(errorEntryByCode(err.code)?.name).toBe('AGENT_UNREACHABLE');
  });
});

describe('generated error docs', () => {
  it('docs/errors.md matches the catalog', () => {
    expect(existsSync(ERRORS_DOC_PATH), `docs/errors.md missing; ${REGENERATE}`).toBe(true);
    expect(readFileSync(ERRORS_DOC_PATH, 'utf8'), `docs/errors.md is stale; ${REGENERATE}`).toBe(renderErrorDoc());
  });

  it('the table lists every catalog entry once', () => {
    const table = renderErrorTable();
    for (const e of ERROR_CATALOG) expect(table.split(`| \`${e.name}\` |`).length - 1, e.name).toBe(1);
  });

  it('the README table between the error markers matches the catalog, when the README has the markers', () => {
    const readme = existsSync(README_PATH) ? readFileSync(README_PATH, 'utf8') : '';
    const section = readmeErrorSection(readme);
    if (section === undefined) return; // no markers: the README links docs/errors.md instead
    expect(section.trim(), `README error table is stale; ${REGENERATE}`).toBe(renderErrorTable().trim());
  });
});
