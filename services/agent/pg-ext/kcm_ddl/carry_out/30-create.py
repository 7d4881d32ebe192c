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
        if rel.get('reroute', True):
            plpy.execute('SELECT kcm_ddl.route_rows(%s::regclass)' % plpy.quote_literal(rel['parent']))
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

def require_row_identity(rel, cols, keys, qualified):
    # mysql_fdw 2.8 writes a shard table only when its first column is a key (it asks the
    # shard at every INSERT, UPDATE and DELETE: "first column of remote table must be
    # unique"), and an UPDATE or DELETE reaches the shard as `WHERE <first column> = ?`. So
    # the first column alone must be the PRIMARY KEY, or UNIQUE and NOT NULL: a key that only
    # starts with it would let one DELETE remove every row sharing the value, a nullable one
    # would leave rows whose first column is NULL out of every UPDATE and DELETE.
    first = cols[0]['name'] if cols else None
    alone = 'PRIMARY KEY (%s)' % mq(first) if first is not None else None
    if alone in keys:
        return
    if cols and cols[0]['notnull'] and any(k.startswith('UNIQUE KEY ') and k.endswith(' (%s)' % mq(first)) for k in keys):
        return
    hint = 'Make the first column the primary key: CREATE TABLE %s (id bigint PRIMARY KEY, ...)' % rel['name']
    if rel['bound']:
        hint = 'Give the partition one on its first column: CREATE TABLE %s PARTITION OF %s (PRIMARY KEY (%s)) FOR VALUES ...' % (rel['name'], rel['parent'], first)
    fail('kcm: %s has no primary key on its first column%s; rows of a shard table are written through its first column, which must be its primary key (or UNIQUE NOT NULL) on its own; nothing was created'
         % (qualified, '' if first is None else ' (%s)' % first), '42P16', hint=hint)

def create_one(conns, rel, owner):
    qualified = '%s.%s' % (rel['schema'], rel['name'])
    rdb = remote_db(rel['schema'])
    if rel['bound']:
        prepare_parent(rel['parent'])
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
    require_row_identity(rel, cols, keys, qualified)
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
        comment = " COMMENT='%s'" % partition_record(rel['parent'], rel['bound']).replace('\\', '\\\\').replace("'", "''")
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

