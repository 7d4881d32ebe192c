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

