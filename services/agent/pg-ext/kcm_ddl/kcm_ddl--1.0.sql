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
                # 3 s for the connection and handshake (a stopped master accepts TCP but never greets);
                # then up to 10 min for one statement (an ALTER TABLE of a big table).
                c = pymysql.connect(host=s['host'], port=s['port'], user=s['user'], password=s['password'],
                                    connect_timeout=3, read_timeout=3, write_timeout=30, autocommit=True, charset='utf8mb4')
                c._read_timeout = 600
                conns[s['id']] = c
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

def column_definitions(relid, qualified, check=True):
    cols = plpy.execute("""
        SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS notnull,
               pg_get_expr(d.adbin, d.adrelid) AS dflt, a.attidentity AS ident, a.attgenerated AS gen
          FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
         WHERE a.attrelid = %d AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum""" % relid)
    return cols, [column_definition(c, qualified) for c in cols] if check else []

def column_definition(c, qualified):
    t = mariadb_type(c['type'])
    if t is None:
        fail('kcm: column %s.%s has type %s, which has no MariaDB form that reads back the same; nothing was changed' % (qualified, c['name'], c['type']),
                   hint='Types kcm maps: ' + SUPPORTED + '.')
    if c['ident'] or c['gen']:
        fail('kcm: column %s.%s is an identity or generated column, which kcm does not carry to a shard; nothing was changed' % (qualified, c['name']))
    d = mariadb_default(c['dflt'])
    if d is False:
        fail('kcm: column %s.%s has default %s; kcm carries constant defaults only; nothing was changed' % (qualified, c['name'], c['dflt']))
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
    plpy.execute('DROP %s %s' % ('FOREIGN TABLE' if rel.get('foreign') else 'TABLE', target))
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
    if rel['bound']:
        plpy.execute('SELECT kcm_ddl.route_inserts(%s::regclass)' % plpy.quote_literal(rel['parent']))
        # Marks the parent as kcm's: the catalog sync drops it once its last partition is gone.
        plpy.execute("COMMENT ON TABLE %s IS 'kcm:partitioned'" % rel['parent'])
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
    keys = key_definitions(rel['relid'], qualified)
    if rel['bound'] and not any(k.startswith('PRIMARY KEY') for k in keys):
        # A parent with foreign partitions cannot have a primary key, and mysql_fdw writes only
        # to tables whose first column is unique: the partition key is the shard table's key.
        pk = plpy.execute('''SELECT array_agg(a.attname::text ORDER BY k.o) AS cols, coalesce(bool_and(a.attnotnull), false) AS notnull, bool_or(k.n = 0) AS expr
                               FROM pg_partitioned_table p CROSS JOIN LATERAL unnest(p.partattrs::int2[]) WITH ORDINALITY k(n, o)
                               LEFT JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = k.n
                              WHERE p.partrelid = %s::regclass''' % plpy.quote_literal(rel['parent']))
        if len(pk) == 0 or pk[0]['expr'] or not pk[0]['notnull'] or not pk[0]['cols']:
            fail('kcm: partition %s has no primary key, and the partition key of %s is not NOT NULL columns; nothing was changed' % (qualified, rel['parent']),
                 hint='Declare one in the partition: CREATE TABLE ... PARTITION OF ... (PRIMARY KEY (<first column>)) FOR VALUES ...')
        keys.insert(0, 'PRIMARY KEY (%s)' % ', '.join(mq(c) for c in pk[0]['cols']))
    defs += keys
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
    comment = ''
    if rel['bound']:
        # How other compute nodes rebuild the partitioned parent (the catalog sync reads it).
        part = plpy.execute('SELECT n.nspname AS schema, c.relname AS name, pg_get_partkeydef(c.oid) AS key FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = %s::regclass' % plpy.quote_literal(rel['parent']))[0]
        comment = " COMMENT='%s'" % json.dumps({'kcm_partition_of': [part['schema'], part['name']], 'key': part['key'], 'bound': rel['bound']}).replace('\\', '\\\\').replace("'", "''")
        if len(comment) > 2000:
            fail('kcm: the partition bound of %s is too long to record on the shard; nothing was changed' % qualified)
    try:
        sql(conn, 'CREATE TABLE %s.%s (%s) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4%s' % (mq(rdb), mq(rel['name']), ', '.join(defs), comment))
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

def altered_foreign_tables():
    return plpy.execute("""
        SELECT DISTINCT c.oid AS relid, n.nspname AS schema, c.relname AS name, substr(srv.srvname, 7) AS shard,
               (SELECT substr(o, 8) FROM unnest(ft.ftoptions) o WHERE starts_with(o, 'dbname=')) AS rdb,
               (SELECT substr(o, 12) FROM unnest(ft.ftoptions) o WHERE starts_with(o, 'table_name=')) AS rtable
          FROM pg_event_trigger_ddl_commands() e
          JOIN pg_class c ON c.oid = e.objid AND e.classid = 'pg_class'::regclass
          JOIN pg_namespace n ON n.oid = c.relnamespace
          JOIN pg_foreign_table ft ON ft.ftrelid = c.oid
          JOIN pg_foreign_server srv ON srv.oid = ft.ftserver AND starts_with(srv.srvname, 'shard_')
         WHERE e.command_tag IN ('ALTER TABLE', 'ALTER FOREIGN TABLE')""")

def alter_tables():
    altered = altered_foreign_tables()
    if len(altered) == 0:
        return
    conns = connect_all('ALTER TABLE')
    try:
        for r in altered:
            alter_one(conns, dict(r))
    finally:
        close_all(conns)

def alter_one(conns, rel):
    # The foreign table already has the user's change; the shard table is made to match it:
    # a new name or schema is a RENAME TABLE, then columns are compared by name and position.
    qualified = '%s.%s' % (rel['schema'], rel['name'])
    if rel['shard'] not in conns:
        fail('kcm: %s is on shard %s, which is not in this cluster any more; nothing was changed' % (qualified, rel['shard']), '55000')
    conn = conns[rel['shard']]
    target = '%s.%s' % (qi(rel['schema']), qi(rel['name']))
    rdb, rtable = remote_db(rel['schema']), rel['name']
    if (rdb, rtable) != (rel['rdb'], rel['rtable']):
        if holders(conns, rdb, rtable):
            fail('kcm: a shard already has a table %s.%s; nothing was changed' % (rdb, rtable), '42P07')
        sql(conn, 'CREATE DATABASE IF NOT EXISTS %s DEFAULT CHARACTER SET utf8mb4' % mq(rdb))
        sql(conn, 'RENAME TABLE %s.%s TO %s.%s' % (mq(rel['rdb']), mq(rel['rtable']), mq(rdb), mq(rtable)))
        GD['kcm_ddl_busy'] = True
        try:
            plpy.execute('ALTER FOREIGN TABLE %s OPTIONS (SET dbname %s, SET table_name %s)' % (target, plpy.quote_literal(rdb), plpy.quote_literal(rtable)))
        finally:
            GD['kcm_ddl_busy'] = False
    cols, _ = column_definitions(rel['relid'], qualified, check=False)
    local = [c['name'] for c in cols]
    remote = [r[0] for r in sql(conn, 'SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION', (rdb, rtable))]
    added = [c for c in cols if c['name'] not in remote]
    removed = [n for n in remote if n not in local]
    changes = []
    if len(added) == 1 and len(removed) == 1 and local.index(added[0]['name']) == remote.index(removed[0]):
        changes.append('RENAME COLUMN %s TO %s' % (mq(removed[0]), mq(added[0]['name'])))
    else:
        changes += ['DROP COLUMN %s' % mq(n) for n in removed]
        changes += ['ADD COLUMN %s' % column_definition(c, qualified) for c in added]
    if changes:
        try:
            sql(conn, 'ALTER TABLE %s.%s %s' % (mq(rdb), mq(rtable), ', '.join(changes)))
        except Exception as e:
            fail('kcm: shard %s refused ALTER TABLE %s (%s): %s; nothing was changed' % (rel['shard'], qualified, ', '.join(changes), e))
    GD['kcm_ddl_busy'] = True
    try:
        if removed and not plpy.execute('SELECT relispartition AS p FROM pg_class WHERE oid = %d' % rel['relid'])[0]['p']:
            # mysql_fdw sends INSERT values by attribute number and gets them wrong once a
            # column was dropped: the foreign table is imported afresh, with what it carried.
            owner = plpy.execute('SELECT pg_get_userbyid(relowner) AS o FROM pg_class WHERE oid = %d' % rel['relid'])[0]['o']
            fresh = {'schema': rel['schema'], 'name': rel['name'], 'bound': None, 'cols': cols, 'foreign': True}
            replace_with_foreign(fresh, rdb, rel['shard'], signature(conn, rdb, rtable), owner)
        else:
            plpy.execute('COMMENT ON FOREIGN TABLE %s IS %s' % (target, plpy.quote_literal('kcm:' + signature(conn, rdb, rtable))))
    finally:
        GD['kcm_ddl_busy'] = False

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
        alter_tables()
    elif event == 'drop':
        drop_tables()
except Refusal as r:
    return [str(r), r.code, r.hint]
return None
$py$;

-- INSERT into a partitioned table whose partitions are mysql_fdw foreign tables: mysql_fdw
-- refuses tuple routing ("COPY and foreign partition routing not supported"), but an INSERT
-- straight into a foreign table works. So the parent gets one conditional INSTEAD rule per
-- partition, `ON INSERT WHERE <the row belongs there> DO INSTEAD INSERT INTO <partition>`,
-- rebuilt whenever a partition is added. A row that belongs nowhere reaches the parent
-- itself and fails as PostgreSQL fails it ("no partition of relation ... found for row").
-- Hash partitions (any number of key columns), list and range partitions on one key column.
CREATE FUNCTION kcm_ddl.route_inserts(parent_rel regclass) RETURNS void
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog AS $py$
import re
def qi(n):
    return plpy.quote_ident(n)
parent = plpy.execute('SELECT %s::regclass::oid AS o' % plpy.quote_literal(parent_rel))[0]['o']  # PL/Python passes regclass as its name
info = plpy.execute('''SELECT p.partstrat AS strat, array(SELECT a.attname::text FROM unnest(p.partattrs::int2[]) WITH ORDINALITY k(n, o)
                                JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = k.n ORDER BY k.o) AS keys,
                              0 = ALL(p.partattrs::int2[]) AS has_expr
                         FROM pg_partitioned_table p WHERE p.partrelid = %d''' % parent)
if len(info) == 0:
    return
strat, keys = info[0]['strat'], list(info[0]['keys'])
for r in plpy.execute("SELECT rulename FROM pg_rewrite WHERE ev_class = %d AND starts_with(rulename, 'kcm_route')" % parent):
    plpy.execute('DROP RULE %s ON %s' % (qi(r['rulename']), plpy.execute('SELECT %d::regclass::text AS t' % parent)[0]['t']))
target = plpy.execute('SELECT %d::regclass::text AS t' % parent)[0]['t']
new_keys = ['NEW.%s' % qi(k) for k in keys]
for i, p in enumerate(plpy.execute('''SELECT c.oid::regclass::text AS child, pg_get_expr(c.relpartbound, c.oid) AS bound
                                        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %d ORDER BY c.oid''' % parent)):
    bound = p['bound']
    m = re.fullmatch(r'FOR VALUES WITH \(modulus (\d+), remainder (\d+)\)', bound)
    if strat == 'h' and m:
        cond = 'satisfies_hash_partition(%d::oid, %s, %s, %s)' % (parent, m.group(1), m.group(2), ', '.join(new_keys))
    elif strat == 'l' and len(keys) == 1 and bound.startswith('FOR VALUES IN ('):
        cond = '%s IN %s' % (new_keys[0], bound[len('FOR VALUES IN '):])
    elif strat == 'r' and len(keys) == 1:
        m = re.fullmatch(r'FOR VALUES FROM \((.*)\) TO \((.*)\)', bound)
        if not m:
            plpy.error('kcm: partition %s (%s) cannot be routed to' % (p['child'], bound))
        parts = []
        if m.group(1) != 'MINVALUE':
            parts.append('%s >= %s' % (new_keys[0], m.group(1)))
        if m.group(2) != 'MAXVALUE':
            parts.append('%s < %s' % (new_keys[0], m.group(2)))
        cond = ' AND '.join(parts) if parts else 'true'
    else:
        plpy.error('kcm: partition %s (%s) cannot be routed to: kcm routes hash partitions and list or range partitions on one key column' % (p['child'], bound))
    plpy.execute('CREATE RULE %s AS ON INSERT TO %s WHERE %s DO INSTEAD INSERT INTO %s VALUES (NEW.*)' % (qi('kcm_route_%d' % i), target, cond, p['child']))
$py$;

-- The catalog sync's side of partitions: a shard table recorded as a partition is attached
-- to its parent, which is made (from the partition's columns) when this node has none.
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
attached = plpy.execute('SELECT 1 FROM pg_inherits WHERE inhrelid = %s::regclass' % plpy.quote_literal(child))
if len(attached) == 0:
    plpy.execute('ALTER TABLE %s ATTACH PARTITION %s %s' % (target, child, bound))
plpy.execute('SELECT kcm_ddl.route_inserts(%s::regclass)' % plpy.quote_literal(target))
$py$;

-- Partitioned parents the sync made, once their last partition is gone.
CREATE FUNCTION kcm_ddl.drop_empty_parents() RETURNS void
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog AS $py$
for r in plpy.execute('''SELECT c.oid::regclass::text AS t FROM pg_class c WHERE c.relkind = 'p'
                           AND obj_description(c.oid, 'pg_class') = 'kcm:partitioned'
                           AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid)'''):
    plpy.execute('DROP TABLE %s' % r['t'])
$py$;

-- Superuser work on any table: only kcm_ddl itself (as the definer) and the agent call these.
REVOKE EXECUTE ON FUNCTION kcm_ddl.route_inserts(regclass), kcm_ddl.adopt_partition(regclass, text, text, text, text, text), kcm_ddl.drop_empty_parents() FROM PUBLIC;

-- CREATE INDEX / DROP INDEX on a table of the shards (called by kcm_ddl.c, as the user):
-- the index lives on the shard table only; every compute node's scans use it there.
CREATE FUNCTION kcm_ddl.create_index(rel regclass, name text, is_unique boolean, cols text[]) RETURNS void
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog AS $py$
import pymysql
r = plpy.execute('''SELECT pg_has_role(session_user, c.relowner, 'USAGE') AS mine, c.relname AS tbl,
                           (SELECT substr(o, 8) FROM unnest(ft.ftoptions) o WHERE starts_with(o, 'dbname=')) AS rdb,
                           (SELECT substr(o, 12) FROM unnest(ft.ftoptions) o WHERE starts_with(o, 'table_name=')) AS rtable,
                           s.srvoptions AS so, um.umoptions AS uo
                      FROM pg_class c JOIN pg_foreign_table ft ON ft.ftrelid = c.oid
                      JOIN pg_foreign_server s ON s.oid = ft.ftserver AND starts_with(s.srvname, 'shard_')
                      JOIN pg_user_mapping um ON um.umserver = s.oid JOIN pg_roles ro ON ro.oid = um.umuser AND ro.rolname = 'postgres'
                     WHERE c.oid = %s::regclass''' % plpy.quote_literal(rel))
if len(r) == 0:
    plpy.error('kcm: %s is not a table of the shards; PostgreSQL keeps no index on a foreign table' % rel)
r = r[0]
if not r['mine']:
    plpy.error('kcm: must be owner of table %s' % r['tbl'])
index_name = name or '%s_%s_idx' % (r['tbl'], '_'.join(cols))
if len(index_name) > 64:
    plpy.error('kcm: index name %s is longer than 64 characters' % index_name)
o = dict(x.split('=', 1) for x in list(r['so'] or []) + list(r['uo'] or []))
mq = lambda n: '`' + n.replace('`', '``') + '`'
try:
    c = pymysql.connect(host=o['host'], port=int(o['port']), user=o['username'], password=o.get('password', ''), connect_timeout=3, read_timeout=3, autocommit=True)
except Exception as e:
    plpy.error('kcm: CREATE INDEX: the shard of %s (%s:%s) cannot be reached: %s; nothing was changed' % (r['tbl'], o['host'], o['port'], e))
c._read_timeout = 3600
try:
    with c.cursor() as cur:
        if cur.execute('SELECT 1 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND INDEX_NAME = %s', (r['rdb'], index_name)):
            plpy.error('kcm: an index named %s already exists in %s on the shard; nothing was changed' % (index_name, r['rdb']))
        cur.execute('CREATE %sINDEX %s ON %s.%s (%s)' % ('UNIQUE ' if is_unique else '', mq(index_name), mq(r['rdb']), mq(r['rtable']), ', '.join(mq(x) for x in cols)))
finally:
    c.close()
$py$;

CREATE FUNCTION kcm_ddl.drop_index(schema_name text, name text, missing_ok boolean) RETURNS void
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog AS $py$
import pymysql
db = plpy.execute('SELECT current_database() AS d')[0]['d']
rows = plpy.execute('''SELECT substr(s.srvname, 7) AS id, s.srvoptions AS so, um.umoptions AS uo FROM pg_foreign_server s
                        JOIN pg_user_mapping um ON um.umserver = s.oid JOIN pg_roles r ON r.oid = um.umuser AND r.rolname = 'postgres'
                       WHERE starts_with(s.srvname, 'shard_')''')
mq = lambda n: '`' + n.replace('`', '``') + '`'
conns, found = [], []
try:
    for s in rows:
        o = dict(x.split('=', 1) for x in list(s['so'] or []) + list(s['uo'] or []))
        try:
            c = pymysql.connect(host=o['host'], port=int(o['port']), user=o['username'], password=o.get('password', ''), connect_timeout=3, read_timeout=3, autocommit=True)
        except Exception as e:
            plpy.error('kcm: DROP INDEX: shard %s (%s:%s) cannot be reached: %s; nothing was changed' % (s['id'], o['host'], o['port'], e))
        c._read_timeout = 3600
        conns.append(c)
        with c.cursor() as cur:
            pattern = (db + '_$$_' + schema_name) if schema_name else (db.replace('\\', '\\\\').replace('_', '\\_').replace('%', '\\%') + '\\_$$\\_%')
            cur.execute('SELECT DISTINCT TABLE_SCHEMA, TABLE_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA LIKE %s AND INDEX_NAME = %s',
                        (pattern.replace('_$$_', '\\_$$\\_') if schema_name else pattern, name))
            found += [(c, t[0], t[1]) for t in cur.fetchall()]
    if len(found) > 1:
        plpy.error('kcm: index name %s is on several tables (%s); nothing was changed' % (name, ', '.join('%s.%s' % (f[1], f[2]) for f in found)))
    if not found:
        if missing_ok:
            plpy.notice('index "%s" does not exist, skipping' % name)
        else:
            plpy.error('index "%s" does not exist' % name)
    for c, d, t in found:
        owner = plpy.execute("SELECT pg_has_role(session_user, c.relowner, 'USAGE') AS mine FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s"
                             % (plpy.quote_literal(d.split('_$$_', 1)[1]), plpy.quote_literal(t)))
        if owner and not owner[0]['mine']:
            plpy.error('kcm: must be owner of table %s' % t)
        with c.cursor() as cur:
            cur.execute('DROP INDEX %s ON %s.%s' % (mq(name), mq(d), mq(t)))
finally:
    for c in conns:
        c.close()
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
