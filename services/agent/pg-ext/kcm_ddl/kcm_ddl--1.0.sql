-- kcm_ddl 1.0: DDL issued on a compute node is carried out on the shards, in the same
-- statement. Why event triggers + PL/Python: the statement is parsed, checked and
-- permission-checked by PostgreSQL itself, our code runs inside the user's transaction
-- (a PostgreSQL-side failure rolls the local catalog back by itself), and the shard side
-- is one pymysql connection per shard with the credentials the catalog sync already keeps
-- in this database's user mappings. The C part (kcm_ddl.c) only lets DROP TABLE name a
-- foreign table.
--
-- CREATE TABLE: ddl_command_end sees the new (local, empty) table, maps its columns to
-- MariaDB types, refuses what has no faithful MariaDB form, checks every shard for the
-- name, creates the table on the chosen shard in database <D>_$$_<S>, then replaces the
-- local table with a foreign table imported from there. A failure after the shard CREATE
-- drops it again (and the database, when this statement created it).
-- DROP TABLE (and DROP SCHEMA ... CASCADE): sql_drop removes each dropped foreign table
-- from the shard that holds it; every shard must answer first, so a drop is all or nothing.
-- ALTER TABLE ADD/DROP/RENAME COLUMN on such a table: ddl_command_end compares the foreign
-- table's columns with the shard's and applies the difference there.
-- The agent's own catalog sync sets kcm.sync = on: its imports and drops are not user DDL.

CREATE FUNCTION kcm_ddl.carry_out(event text) RETURNS text[]
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog AS $py$
import hashlib
import json
import re
import pymysql

class Refusal(Exception):
    """A statement kcm refuses: reported by the trigger as a plain ERROR with an SQLSTATE and hint."""
    def __init__(self, message, code='0A000', hint=None):
        Exception.__init__(self, message)
        self.code, self.hint = code, hint

def fail(message, code='0A000', hint=None):
    raise Refusal(message, code, hint)

if (plpy.execute("SELECT current_setting('kcm.sync', true) AS v")[0]['v'] or '') == 'on':
    return
if GD.get('kcm_ddl_busy'):
    return  # DDL this function runs itself

SEP = '_$$_'
database = plpy.execute('SELECT current_database() AS d')[0]['d']

def qi(name):
    return plpy.quote_ident(name)

def mq(name):
    return '`' + name.replace('`', '``') + '`'

def shards():
    rows = plpy.execute("""
        SELECT substr(s.srvname, 7) AS id, s.srvoptions AS so, um.umoptions AS uo
          FROM pg_foreign_server s
          JOIN pg_user_mapping um ON um.umserver = s.oid
          JOIN pg_roles r ON r.oid = um.umuser AND r.rolname = 'postgres'
         WHERE starts_with(s.srvname, 'shard_')
         ORDER BY length(s.srvname), s.srvname""")
    found = []
    for r in rows:
        o = dict(x.split('=', 1) for x in list(r['so'] or []) + list(r['uo'] or []))
        found.append({'id': r['id'], 'host': o.get('host'), 'port': int(o.get('port', '0')), 'user': o.get('username'), 'password': o.get('password', '')})
    if not found:
        fail('kcm: database %s has no shard servers yet (the catalog sync adds them within seconds of CREATE DATABASE); nothing was changed' % database, '55000')
    return found

def connect_all(what):
    conns = {}
    try:
        for s in shards():
            try:
                conns[s['id']] = pymysql.connect(host=s['host'], port=s['port'], user=s['user'], password=s['password'],
                                                 connect_timeout=3, read_timeout=30, write_timeout=30, autocommit=True, charset='utf8mb4')
            except Exception as e:
                fail('kcm: %s: shard %s (%s:%d) cannot be reached: %s; nothing was changed' % (what, s['id'], s['host'], s['port'], e), '08006')
    except Exception:
        for c in conns.values():
            c.close()
        raise
    return conns

def close_all(conns):
    for c in conns.values():
        try:
            c.close()
        except Exception:
            pass

def sql(conn, statement, args=None):
    with conn.cursor() as cur:
        cur.execute(statement, args)
        return cur.fetchall()

def remote_db(schema):
    rdb = database + SEP + schema
    if len(rdb) > 64:
        fail('kcm: MariaDB database name %s is longer than 64 characters; use a shorter database or schema name' % rdb)
    return rdb

def holders(conns, rdb, table):
    return [sid for sid, c in conns.items()
            if sql(c, 'SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s', (rdb, table))]

# PostgreSQL type (format_type) -> MariaDB type. Only types that mysql_fdw imports back as
# the same PostgreSQL type are accepted, so the table reads back exactly as it was declared.
SIMPLE_TYPES = {
    'smallint': 'SMALLINT', 'integer': 'INT', 'bigint': 'BIGINT',
    'real': 'FLOAT', 'double precision': 'DOUBLE',
    'text': 'LONGTEXT', 'bytea': 'LONGBLOB', 'date': 'DATE',
    'timestamp without time zone': 'DATETIME(6)', 'time without time zone': 'TIME(6)',
}

def mariadb_type(pg_type):
    if pg_type in SIMPLE_TYPES:
        return SIMPLE_TYPES[pg_type]
    m = re.fullmatch(r'character varying\((\d+)\)', pg_type)
    if m:
        return 'VARCHAR(%s)' % m.group(1)
    m = re.fullmatch(r'character\((\d+)\)', pg_type)
    if m and int(m.group(1)) <= 255:
        return 'CHAR(%s)' % m.group(1)
    m = re.fullmatch(r'numeric\((\d+),(\d+)\)', pg_type)
    if m and int(m.group(1)) <= 65 and int(m.group(2)) <= 30:
        return 'DECIMAL(%s,%s)' % (m.group(1), m.group(2))
    m = re.fullmatch(r'(timestamp|time)\(([0-6])\) without time zone', pg_type)
    if m:
        return '%s(%s)' % ('DATETIME' if m.group(1) == 'timestamp' else 'TIME', m.group(2))
    return None

SUPPORTED = 'smallint, integer, bigint, real, double precision, numeric(p,s) (p <= 65, s <= 30), text, varchar(n), char(n) (n <= 255), bytea, date, timestamp [without time zone], time [without time zone]'

def mariadb_default(expr):
    if expr is None:
        return None
    if re.fullmatch(r'-?\d+(\.\d+)?', expr) or expr == 'NULL':
        return expr
    m = re.fullmatch(r"'((?:[^']|'')*)'(::[a-z ]+(\(\d+(,\d+)?\))?)?", expr)
    if m:
        return "'" + m.group(1).replace('\\', '\\\\') + "'"
    m = re.fullmatch(r"\('?(-?\d+(\.\d+)?)'?(::[a-z ]+)?\)(::[a-z ]+)?", expr)
    if m:
        return m.group(1)
    return False

def column_definitions(relid, qualified):
    cols = plpy.execute("""
        SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS notnull,
               pg_get_expr(d.adbin, d.adrelid) AS dflt, a.attidentity AS ident, a.attgenerated AS gen
          FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
         WHERE a.attrelid = %d AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum""" % relid)
    out = []
    for c in cols:
        out.append(column_definition(c, qualified))
    return cols, out

def column_definition(c, qualified):
    t = mariadb_type(c['type'])
    if t is None:
        fail('kcm: column %s.%s has type %s, which has no MariaDB form that reads back the same; nothing was created' % (qualified, c['name'], c['type']),
                   hint='Types kcm maps: ' + SUPPORTED + '.')
    if c['ident'] or c['gen']:
        fail('kcm: column %s.%s is an identity or generated column, which kcm does not carry to a shard; nothing was created' % (qualified, c['name']))
    d = mariadb_default(c['dflt'])
    if d is False:
        fail('kcm: column %s.%s has default %s; kcm carries constant defaults only; nothing was created' % (qualified, c['name'], c['dflt']))
    return '%s %s%s%s' % (mq(c['name']), t, ' NOT NULL' if c['notnull'] else ' NULL', '' if d is None else ' DEFAULT ' + d)

def key_definitions(relid, qualified):
    keys = []
    for k in plpy.execute("""
        SELECT c.contype AS kind, c.conname AS name,
               array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, o)
                       JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o)::text[] AS cols
          FROM pg_constraint c WHERE c.conrelid = %d ORDER BY c.oid""" % relid):
        cols = ', '.join(mq(n) for n in k['cols'])
        if k['kind'] == 'p':
            keys.append('PRIMARY KEY (%s)' % cols)
        elif k['kind'] == 'u':
            keys.append('UNIQUE KEY %s (%s)' % (mq(k['name']), cols))
        else:
            fail('kcm: constraint %s on %s is a %s constraint; kcm carries PRIMARY KEY and UNIQUE only (rows of one table live on one shard, checks and foreign keys are not enforced across shards); nothing was created'
                       % (k['name'], qualified, {'c': 'CHECK', 'f': 'FOREIGN KEY', 'x': 'EXCLUDE'}.get(k['kind'], k['kind'])))
    return keys

def digest(value):
    text = json.dumps(value, separators=(',', ':'), ensure_ascii=False)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()[:24]

def catalog_default(raw):
    # The default the catalog sync gives a foreign column (column-defaults.ts) for the forms
    # kcm itself creates; False for any other form (the sync then sets it on its next round).
    if raw is None or raw == 'NULL':
        return None
    raw = raw.strip()
    if re.fullmatch(r'-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?', raw):
        return raw
    if len(raw) >= 2 and raw[0] == "'" and raw[-1] == "'" and '\\' not in raw and '\0' not in raw and "'" not in raw[1:-1].replace("''", ''):
        return raw
    return False

def signature(conn, rdb, table):
    # kcm:<columns>:<attributes>, the comment the catalog sync gives the tables it imports
    # (shard-catalog.ts), so that it keeps this one as it is instead of importing or altering it.
    rows = sql(conn, '''SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT FROM information_schema.COLUMNS
                         WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION''', (rdb, table))
    columns = digest([[r[0], r[1]] for r in rows])
    defaults = [catalog_default(r[3]) for r in rows]
    if False in defaults:
        return columns
    return columns + ':' + digest([[r[0], r[2] == 'NO', d] for r, d in zip(rows, defaults)])

def choose_shard(conns, qualified):
    wanted = (plpy.execute("SELECT current_setting('kcm.shard', true) AS v")[0]['v'] or '').strip()
    if wanted:
        if wanted not in conns:
            fail('kcm: kcm.shard = %s names no shard of this cluster (shards: %s); nothing was created' % (wanted, ', '.join(conns)))
        return wanted
    # Policy: the shard holding the fewest tables; ties go to the lowest shard id.
    counts = [(sql(c, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA LIKE %s", ('%\\_$$\\_%',))[0][0], i, sid)
              for i, (sid, c) in enumerate(conns.items())]
    return min(counts)[2]

def replace_with_foreign(rel, rdb, shard_id, sig, owner):
    schema, name = rel['schema'], rel['name']
    target = '%s.%s' % (qi(schema), qi(name))
    plpy.execute('DROP TABLE %s' % target)
    if rel['bound']:
        plpy.execute('CREATE FOREIGN TABLE %s PARTITION OF %s %s SERVER %s OPTIONS (dbname %s, table_name %s)'
                     % (target, rel['parent'], rel['bound'], qi('shard_' + shard_id), plpy.quote_literal(rdb), plpy.quote_literal(name)))
    else:
        plpy.execute('IMPORT FOREIGN SCHEMA %s LIMIT TO (%s) FROM SERVER %s INTO %s' % (qi(rdb), qi(name), qi('shard_' + shard_id), qi(schema)))
        got = plpy.execute("""SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a
                               WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum""" % plpy.quote_literal(target))
        base = lambda t: re.sub(r'\(\d+(,\d+)?\)', '', t)
        if [(r['name'], base(r['type'])) for r in got] != [(c['name'], base(c['type'])) for c in rel['cols']]:
            fail('kcm: %s reads back from its shard as %s, not as declared; nothing was created' % (target, ', '.join('%s %s' % (r['name'], r['type']) for r in got)))
    for c, r in zip(rel['cols'], got if not rel['bound'] else rel['cols']):
        # mysql_fdw imports numeric and timestamp without their precision: keep the declared one.
        if r['type'] != c['type']:
            plpy.execute('ALTER FOREIGN TABLE %s ALTER COLUMN %s TYPE %s' % (target, qi(c['name']), c['type']))
    for c in rel['cols']:
        if c['notnull']:
            plpy.execute('ALTER FOREIGN TABLE %s ALTER COLUMN %s SET NOT NULL' % (target, qi(c['name'])))
        if c['dflt'] is not None and not rel['bound']:
            plpy.execute('ALTER FOREIGN TABLE %s ALTER COLUMN %s SET DEFAULT %s' % (target, qi(c['name']), c['dflt']))
    plpy.execute('ALTER FOREIGN TABLE %s OWNER TO %s' % (target, qi(owner)))
    # The catalog sync's column signature: it keeps this table instead of importing it again.
    plpy.execute('COMMENT ON FOREIGN TABLE %s IS %s' % (target, plpy.quote_literal('kcm:' + sig)))

def create_tables():
    made = plpy.execute("""
        SELECT c.oid AS relid, n.nspname AS schema, c.relname AS name, c.relkind AS kind, c.relpersistence AS persistence,
               c.relispartition AS is_partition,
               CASE WHEN c.relispartition THEN pg_get_expr(c.relpartbound, c.oid) END AS bound,
               (SELECT i.inhparent::regclass::text FROM pg_inherits i WHERE i.inhrelid = c.oid) AS parent
          FROM pg_event_trigger_ddl_commands() e
          JOIN pg_class c ON c.oid = e.objid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE e.command_tag = 'CREATE TABLE' AND e.object_type = 'table' AND c.relkind = 'r' AND c.relpersistence <> 't'""")
    if len(made) == 0:
        return
    owner = plpy.execute('SELECT session_user AS u')[0]['u']
    conns = connect_all('CREATE TABLE')
    try:
        for r in made:
            create_one(conns, dict(r), owner)
    finally:
        close_all(conns)

def create_one(conns, rel, owner):
    qualified = '%s.%s' % (rel['schema'], rel['name'])
    rdb = remote_db(rel['schema'])
    cols, defs = column_definitions(rel['relid'], qualified)
    rel['cols'] = cols
    defs += key_definitions(rel['relid'], qualified)
    if rel['parent'] and not rel['bound']:
        fail('kcm: %s inherits from %s; kcm carries partitions (PARTITION OF), not inheritance; nothing was created' % (qualified, rel['parent']))
    found = holders(conns, rdb, rel['name'])
    if found:
        fail('kcm: table %s already exists on shard %s as MariaDB %s.%s; nothing was created' % (qualified, ', '.join(found), rdb, rel['name']), '42P07',
                   hint='A table made directly on a shard appears on every compute node through the catalog sync within seconds.')
    shard_id = choose_shard(conns, qualified)
    conn = conns[shard_id]
    db_existed = bool(sql(conn, 'SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s', (rdb,)))
    sql(conn, 'CREATE DATABASE IF NOT EXISTS %s DEFAULT CHARACTER SET utf8mb4' % mq(rdb))
    try:
        sql(conn, 'CREATE TABLE %s.%s (%s) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4' % (mq(rdb), mq(rel['name']), ', '.join(defs)))
    except Exception as e:
        if not db_existed:
            sql(conn, 'DROP DATABASE IF EXISTS %s' % mq(rdb))
        fail('kcm: shard %s refused CREATE TABLE %s: %s; nothing was created' % (shard_id, qualified, e))
    try:
        GD['kcm_ddl_busy'] = True
        try:
            replace_with_foreign(rel, rdb, shard_id, signature(conn, rdb, rel['name']), owner)
        finally:
            GD['kcm_ddl_busy'] = False
    except Exception:
        # Compensate: the shard forgets the table (and the database this statement made).
        sql(conn, 'DROP TABLE IF EXISTS %s.%s' % (mq(rdb), mq(rel['name'])))
        if not db_existed and not sql(conn, 'SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s LIMIT 1', (rdb,)):
            sql(conn, 'DROP DATABASE IF EXISTS %s' % mq(rdb))
        raise

def drop_tables():
    gone = plpy.execute("""SELECT schema_name AS schema, object_name AS name FROM pg_event_trigger_dropped_objects()
                            WHERE object_type = 'foreign table' AND NOT is_temporary""")
    if len(gone) == 0:
        return
    conns = connect_all('DROP')
    try:
        for r in gone:
            rdb = database + SEP + r['schema']
            for sid in holders(conns, rdb, r['name']):
                sql(conns[sid], 'DROP TABLE IF EXISTS %s.%s' % (mq(rdb), mq(r['name'])))
    finally:
        close_all(conns)

try:
    if event == 'end':
        create_tables()
    elif event == 'drop':
        drop_tables()
except Refusal as r:
    return [str(r), r.code, r.hint]
return None
$py$;

-- Raises what carry_out refused as a plain ERROR (PL/Python would prefix it with its exception class).
CREATE FUNCTION kcm_ddl.raise_refusal(refusal text[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF refusal IS NULL THEN RETURN; END IF;
  IF refusal[3] IS NULL THEN RAISE EXCEPTION USING MESSAGE = refusal[1], ERRCODE = refusal[2];
  ELSE RAISE EXCEPTION USING MESSAGE = refusal[1], ERRCODE = refusal[2], HINT = refusal[3];
  END IF;
END $$;

CREATE FUNCTION kcm_ddl.on_command_end() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM kcm_ddl.raise_refusal(kcm_ddl.carry_out('end'));
END $$;

CREATE FUNCTION kcm_ddl.on_sql_drop() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM kcm_ddl.raise_refusal(kcm_ddl.carry_out('drop'));
END $$;

CREATE EVENT TRIGGER kcm_ddl_command_end ON ddl_command_end
  WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'ALTER FOREIGN TABLE')
  EXECUTE FUNCTION kcm_ddl.on_command_end();

CREATE EVENT TRIGGER kcm_ddl_sql_drop ON sql_drop
  WHEN TAG IN ('DROP TABLE', 'DROP FOREIGN TABLE', 'DROP SCHEMA')
  EXECUTE FUNCTION kcm_ddl.on_sql_drop();

GRANT USAGE ON SCHEMA kcm_ddl TO PUBLIC;
