-- INSERT into a partitioned table whose partitions are mysql_fdw foreign tables: mysql_fdw
-- 2.8 refuses PostgreSQL's tuple routing into foreign partitions ("COPY and foreign
-- partition routing not supported"), but an INSERT straight into a foreign table works. So
-- the parent gets one unconditional INSTEAD rule, rebuilt whenever a partition is added or
-- dropped, whose actions are: first a check that fails a row no partition accepts as
-- PostgreSQL fails it ("no partition of relation ... found for row"), before any row is
-- written; then one `INSERT INTO <partition> ... WHERE <the row belongs there>` per
-- partition. The last action sets the command tag; kcm_ddl.c adds the rows of the earlier
-- ones, so the tag counts every row, as PostgreSQL's does. Hash partitions (any number of
-- key columns), list and range partitions on one key column.
CREATE TABLE kcm_ddl.unroutable (CHECK (false));
GRANT INSERT ON kcm_ddl.unroutable TO PUBLIC;

CREATE FUNCTION kcm_ddl.no_partition(parent regclass, key_columns text, key_values text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'no partition of relation "%" found for row', parent USING ERRCODE = 'check_violation',
    DETAIL = format('Partition key of the failing row contains (%s) = %s.', key_columns, key_values);
END $$;

CREATE FUNCTION kcm_ddl.route_rows(parent_rel regclass) RETURNS void
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog AS $py$
import re
def qi(n):
    return plpy.quote_ident(n)
parent = plpy.execute('SELECT %s::regclass::oid AS o' % plpy.quote_literal(parent_rel))[0]['o']  # PL/Python passes regclass as its name
info = plpy.execute('''SELECT p.partstrat AS strat, array(SELECT a.attname::text FROM unnest(p.partattrs::int2[]) WITH ORDINALITY k(n, o)
                                JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = k.n ORDER BY k.o) AS keys,
                              array(SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = p.partrelid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum) AS cols
                         FROM pg_partitioned_table p WHERE p.partrelid = %d''' % parent)
if len(info) == 0:
    return
strat, keys, cols = info[0]['strat'], list(info[0]['keys']), list(info[0]['cols'])
target = plpy.execute('SELECT %d::regclass::text AS t' % parent)[0]['t']
for r in plpy.execute("SELECT rulename FROM pg_rewrite WHERE ev_class = %d AND starts_with(rulename, 'kcm_route')" % parent):
    plpy.execute('DROP RULE %s ON %s' % (qi(r['rulename']), target))

def belongs(bound, child, row):
    """SQL that is true when the row (NEW or OLD) belongs to the partition with this bound."""
    k = ['%s.%s' % (row, qi(c)) for c in keys]
    m = re.fullmatch(r'FOR VALUES WITH \(modulus (\d+), remainder (\d+)\)', bound)
    if strat == 'h' and m:
        # IS TRUE keeps the test on this node: when the rows come straight from a foreign
        # table (INSERT INTO p SELECT ... FROM t), mysql_fdw 2.8 would push a bare built-in
        # call down to MariaDB, which has no satisfies_hash_partition.
        return '(satisfies_hash_partition(%d::oid, %s, %s, %s) IS TRUE)' % (parent, m.group(1), m.group(2), ', '.join(k))
    if strat == 'l' and len(keys) == 1 and bound.startswith('FOR VALUES IN ('):
        return '%s IN %s' % (k[0], bound[len('FOR VALUES IN '):])
    if strat == 'r' and len(keys) == 1:
        m = re.fullmatch(r'FOR VALUES FROM \((.*)\) TO \((.*)\)', bound)
        if not m:
            plpy.error('kcm: partition %s (%s) cannot be routed to' % (child, bound))
        parts = []
        if m.group(1) != 'MINVALUE':
            parts.append('%s >= %s' % (k[0], m.group(1)))
        if m.group(2) != 'MAXVALUE':
            parts.append('%s < %s' % (k[0], m.group(2)))
        return '(%s)' % (' AND '.join(parts) if parts else 'true')
    plpy.error('kcm: partition %s (%s) cannot be routed to: kcm routes hash partitions and list or range partitions on one key column' % (child, bound))

partitions = [(p['child'], belongs(p['bound'], p['child'], 'NEW'), belongs(p['bound'], p['child'], 'OLD'))
              for p in plpy.execute('''SELECT c.oid::regclass::text AS child, pg_get_expr(c.relpartbound, c.oid) AS bound
                                        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %d ORDER BY c.oid''' % parent)]
names = ', '.join(qi(c) for c in cols)
new_row = ', '.join('NEW.%s' % qi(c) for c in cols)
first = qi(cols[0])
unroutable = 'INSERT INTO kcm_ddl.unroutable SELECT WHERE CASE WHEN %s THEN false ELSE kcm_ddl.no_partition(%s, %s, (%s)::text) END' % (
    ' OR '.join(n for _, n, _ in partitions) or 'false', plpy.quote_literal(target), plpy.quote_literal(', '.join(keys)), 'ROW(%s)' % ', '.join('NEW.%s' % qi(k) for k in keys))
inserts = ['INSERT INTO %s (%s) SELECT %s WHERE %s' % (child, names, new_row, new) for child, new, _ in partitions]
plpy.execute('CREATE RULE kcm_route_insert AS ON INSERT TO %s DO INSTEAD (%s)' % (target, '; '.join([unroutable] + inserts)))
$py$;

-- Parents kcm routes whose rules a dropped partition took with it (DROP ... CASCADE).
CREATE FUNCTION kcm_ddl.reroute_parents() RETURNS void
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog AS $py$
for r in plpy.execute('''SELECT c.oid::regclass::text AS t FROM pg_class c WHERE c.relkind = 'p'
                           AND obj_description(c.oid, 'pg_class') = 'kcm:partitioned'
                           AND NOT EXISTS (SELECT 1 FROM pg_rewrite w WHERE w.ev_class = c.oid AND w.rulename = 'kcm_route_insert')'''):
    plpy.execute('SELECT kcm_ddl.route_rows(%s::regclass)' % plpy.quote_literal(r['t']))
$py$;

-- The catalog sync's side of partitions: a shard table recorded as a partition is attached
-- to its parent, which is made (from the partition's columns) when this node has none, and
-- given the partition's columns and defaults when they changed (ALTER TABLE <parent> elsewhere).
CREATE FUNCTION kcm_ddl.adopt_partition(child regclass, parent_schema text, parent_name text, partkey text, bound text, owner text) RETURNS void
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog AS $py$
import re
if not re.fullmatch(r'(HASH|LIST|RANGE) \([A-Za-z0-9_", ]+\)', partkey) or not re.fullmatch(r"FOR VALUES [A-Za-z0-9_,.()' -]+", bound):
    plpy.error('kcm: partition of %s.%s has a key or bound kcm does not rebuild: %s %s' % (parent_schema, parent_name, partkey, bound))
target = '%s.%s' % (plpy.quote_ident(parent_schema), plpy.quote_ident(parent_name))
found = plpy.execute("SELECT c.oid, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s"
                     % (plpy.quote_literal(parent_schema), plpy.quote_literal(parent_name)))
if len(found) == 0:
    plpy.execute('CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS) PARTITION BY %s' % (target, child, partkey))
    plpy.execute('ALTER TABLE %s OWNER TO %s' % (target, plpy.quote_ident(owner)))
    plpy.execute("COMMENT ON TABLE %s IS 'kcm:partitioned'" % target)
elif found[0]['relkind'] != 'p':
    plpy.error('kcm: %s is not a partitioned table; partition %s is left standalone' % (target, child))
else:
    # ALTER TABLE <parent> through another compute node changed every partition on the
    # shards: the parent here is given the columns the re-imported partition has.
    def columns(rel):
        return [(r['n'], r['t']) for r in plpy.execute("""SELECT attname AS n, format_type(atttypid, atttypmod) AS t FROM pg_attribute
                                                          WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum""" % plpy.quote_literal(rel))]
    want, have = dict(columns(child)), dict(columns(target))
    if want != have:
        plpy.execute('DROP RULE IF EXISTS kcm_route_insert ON %s' % target)
        for name in [n for n in have if n not in want]:
            plpy.execute('ALTER TABLE %s DROP COLUMN %s' % (target, plpy.quote_ident(name)))
        for name, typ in want.items():
            if name not in have:
                plpy.execute('ALTER TABLE %s ADD COLUMN %s %s' % (target, plpy.quote_ident(name), typ))
            elif have[name] != typ:
                plpy.execute('ALTER TABLE %s ALTER COLUMN %s TYPE %s' % (target, plpy.quote_ident(name), typ))
attached = plpy.execute('SELECT 1 FROM pg_inherits WHERE inhrelid = %s::regclass' % plpy.quote_literal(child))
if len(attached) == 0:
    plpy.execute('ALTER TABLE %s ATTACH PARTITION %s %s' % (target, child, bound))
# INSERT through the parent takes the parent's defaults (ALTER TABLE <parent> ALTER COLUMN
# ... SET DEFAULT elsewhere reached every partition's shard table): the partition's here.
def defaults(rel):
    return dict((r['n'], r['d']) for r in plpy.execute("""SELECT a.attname AS n, pg_get_expr(d.adbin, d.adrelid) AS d FROM pg_attribute a
                                                          LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                                                          WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped""" % plpy.quote_literal(rel)))
have = defaults(target)
for name, expr in defaults(child).items():
    if name in have and have[name] != expr:
        plpy.execute('ALTER TABLE ONLY %s ALTER COLUMN %s %s' % (target, plpy.quote_ident(name), 'DROP DEFAULT' if expr is None else 'SET DEFAULT ' + expr))
plpy.execute('SELECT kcm_ddl.route_rows(%s::regclass)' % plpy.quote_literal(target))
$py$;

-- Partitioned parents the sync made, once their last partition is gone; the others are
-- routed again (a dropped partition takes its parent's rules with it).
CREATE FUNCTION kcm_ddl.drop_empty_parents() RETURNS void
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog AS $py$
for r in plpy.execute('''SELECT c.oid::regclass::text AS t FROM pg_class c WHERE c.relkind = 'p'
                           AND obj_description(c.oid, 'pg_class') = 'kcm:partitioned'
                           AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid)'''):
    plpy.execute('DROP TABLE %s' % r['t'])
plpy.execute('SELECT kcm_ddl.reroute_parents()')
$py$;

-- Superuser work on any table: only kcm_ddl itself (as the definer) and the agent call these.
REVOKE EXECUTE ON FUNCTION kcm_ddl.route_rows(regclass), kcm_ddl.reroute_parents(), kcm_ddl.adopt_partition(regclass, text, text, text, text, text), kcm_ddl.drop_empty_parents() FROM PUBLIC;

