// Which entries of a compute node's schema dump a restore puts back. The listing is what
// `pg_restore --list` printed for a PostgreSQL 15 database holding kcm's kinds of objects
// (mysql_fdw server, user mapping, foreign table, partitioned parent with a rule, an event
// trigger) beside a user's views, functions, types and sequences.

import { describe, expect, it } from 'vitest';
import { computeOnlyEntries } from '../../src/capabilities/storage/catalog-entries';

const LISTING = `;
; Archive created at 2026-11-29 01:36:10 UTC
;     dbname: postgres
;     Format: CUSTOM
;
; Selected TOC Entries:
;
7; 2615 16391 SCHEMA - sales postgres
2; 3079 16384 EXTENSION - mysql_fdw 
3389; 0 0 COMMENT - EXTENSION mysql_fdw 
860; 1247 16406 TYPE public mood postgres
863; 1247 16412 DOMAIN public posint postgres
227; 1255 16418 FUNCTION public et() postgres
228; 1255 16429 PROCEDURE public pr() postgres
226; 1255 16403 FUNCTION public twice(integer, text) postgres
874; 1255 16428 AGGREGATE public mysum(integer) postgres
2069; 1417 16389 SERVER - s1 postgres
3390; 0 0 USER MAPPING - USER MAPPING postgres SERVER s1 postgres
222; 1259 16421 TABLE public localt postgres
221; 1259 16420 SEQUENCE public localt_id_seq postgres
3391; 0 0 SEQUENCE OWNED BY public localt_id_seq postgres
216; 1259 16392 FOREIGN TABLE public orders postgres
3392; 0 0 COMMENT public FOREIGN TABLE orders postgres
218; 1259 16399 MATERIALIZED VIEW public mv postgres
220; 1259 16414 TABLE public p postgres
217; 1259 16395 VIEW public recent postgres
3393; 0 0 COMMENT public VIEW recent postgres
3394; 0 0 ACL public TABLE recent postgres
219; 1259 16404 SEQUENCE sales ticket postgres
3233; 2604 16424 DEFAULT public localt id postgres
3236; 2606 16426 CONSTRAINT public localt localt_pkey postgres
3234; 1259 16427 INDEX public localt_id_idx postgres
3381; 2618 16417 RULE public p r postgres
3232; 3466 16419 EVENT TRIGGER - etr postgres
`;

describe('the compute-only entries of a catalog dump', () => {
  it('keeps views, functions, procedures, aggregates, types, domains and sequences, and the comments on them', () => {
    const { objects, useList } = computeOnlyEntries(LISTING);
    expect(objects).toEqual([
      'TYPE public mood',
      'DOMAIN public posint',
      'FUNCTION public et()',
      'PROCEDURE public pr()',
      'FUNCTION public twice(integer, text)',
      'AGGREGATE public mysum(integer)',
      'SEQUENCE public localt_id_seq',
      'MATERIALIZED VIEW public mv',
      'VIEW public recent',
      'SEQUENCE sales ticket',
    ]);
    expect(useList).toContain('3393; 0 0 COMMENT public VIEW recent postgres\n');
  });

  it('leaves out what the catalog sync makes from the shards and what names the source: schemas, tables, foreign tables, servers, user mappings, rules, grants, extensions, event triggers', () => {
    const kept = computeOnlyEntries(LISTING).useList;
    for (const left of ['SCHEMA - sales', 'EXTENSION', 'SERVER - s1', 'USER MAPPING', 'TABLE public localt', 'TABLE public p', 'FOREIGN TABLE', 'SEQUENCE OWNED BY', 'ACL', 'DEFAULT', 'CONSTRAINT', 'INDEX', 'RULE', 'EVENT TRIGGER']) {
      expect(kept, left).not.toMatch(new RegExp(`^\\d+; \\d+ \\d+ ${left}`, 'm'));
    }
  });

  it('a dump with nothing of the kind selects nothing', () => {
    expect(computeOnlyEntries('7; 2615 16391 SCHEMA - sales postgres\n216; 1259 16392 FOREIGN TABLE public orders postgres\n')).toEqual({ useList: '', objects: [] });
  });
});
