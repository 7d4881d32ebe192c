# Partitioned tables: the parent stays on the compute node (it holds no rows) and each
# partition is a shard table. mysql_fdw writes a shard table through its first column,
# which must be unique, so a partition without a primary key of its own gets the partition
# key as its shard table's primary key; rows reach their partition through the parent's
# routing rule (kcm_ddl.route_rows). What that takes of the parent is checked when the
# parent is made, and again at every partition (a parent made before kcm_ddl was there).

def partition_key(parent):
    return plpy.execute('''SELECT p.partstrat AS strat, k.n = 0 AS expr, a.attname::text AS name, a.attnotnull AS notnull,
                                  pg_get_expr(d.adbin, d.adrelid) AS dflt
                             FROM pg_partitioned_table p CROSS JOIN LATERAL unnest(p.partattrs::int2[]) WITH ORDINALITY k(n, o)
                             LEFT JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = k.n
                             LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                            WHERE p.partrelid = %s::regclass ORDER BY k.o''' % plpy.quote_literal(parent))

def partition_record(parent, bound):
    # How other compute nodes rebuild the partitioned parent: the shard table's COMMENT,
    # which the catalog sync reads (shard-catalog.ts parsePartitionComment).
    part = plpy.execute('SELECT n.nspname AS schema, c.relname AS name, pg_get_partkeydef(c.oid) AS key FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = %s::regclass' % plpy.quote_literal(parent))[0]
    record = json.dumps({'kcm_partition_of': [part['schema'], part['name']], 'key': part['key'], 'bound': bound})
    if len(record) > 1800:
        fail('kcm: the partition bound %s of %s is too long to record on the shard; nothing was changed' % (bound, parent))
    return record

def prepare_parent(parent, is_partition=False):
    """Refuses a partitioned table kcm cannot carry; makes its key columns NOT NULL (with a NOTICE)."""
    if is_partition:
        fail('kcm: %s is partitioned and a partition itself; kcm does not carry sub-partitioning (a partition is one shard table); nothing was created' % parent)
    key = partition_key(parent)
    strategy = {'h': 'HASH', 'l': 'LIST', 'r': 'RANGE'}[key[0]['strat']]
    if any(k['expr'] for k in key):
        fail('kcm: the partition key of %s is an expression; kcm partitions by columns only (each partition\'s shard table has the key columns as its primary key); nothing was changed' % parent)
    if strategy != 'HASH' and len(key) > 1:
        fail('kcm: %s is partitioned by %s on %d columns; kcm routes rows into list and range partitions on one key column (hash partitions on any number); nothing was changed' % (parent, strategy, len(key)))
    check_key_defaults(parent, key)
    names = [k['name'] for k in key]
    for c in plpy.execute('''SELECT conname AS name, contype AS kind, array(SELECT a.attname::text FROM unnest(conkey) k(n)
                                       JOIN pg_attribute a ON a.attrelid = conrelid AND a.attnum = k.n) AS cols
                               FROM pg_constraint WHERE conrelid = %s::regclass AND contype IN ('p', 'u')''' % plpy.quote_literal(parent)):
        if c['kind'] != 'p' or sorted(c['cols']) != sorted(names):
            fail('kcm: %s has %s %s (%s); PostgreSQL attaches no foreign partition under a unique index, and kcm keeps a partitioned table\'s uniqueness as each partition\'s primary key on its partition key only; nothing was changed'
                 % (parent, 'PRIMARY KEY' if c['kind'] == 'p' else 'UNIQUE constraint', c['name'], ', '.join(c['cols'])),
                 hint='Declare the primary key on exactly the partition key columns, or none.')
        busy_execute('ALTER TABLE %s DROP CONSTRAINT %s' % (parent, qi(c['name'])))
        plpy.notice('kcm: primary key %s of %s is kept as the primary key of each partition\'s shard table (PostgreSQL attaches no foreign partition under a unique index; rows with one key go to one partition)' % (c['name'], parent))
    nullable = [k['name'] for k in key if not k['notnull']]
    for n in nullable:
        busy_execute('ALTER TABLE %s ALTER COLUMN %s SET NOT NULL' % (parent, qi(n)))
    if nullable:
        plpy.notice('kcm: partition key column%s %s of %s made NOT NULL: each partition\'s shard table has the partition key as its primary key'
                    % ('s' if len(nullable) > 1 else '', ', '.join(nullable), parent))

def check_key_defaults(parent, key):
    for k in key:
        if mariadb_default(k['dflt']) is False:
            fail('kcm: partition key column %s.%s has default %s; kcm carries constant defaults only, and a row reaches its partition through one INSERT per partition, each of which would evaluate it anew; nothing was changed' % (parent, k['name'], k['dflt']),
                 hint='Give the key in each INSERT, e.g. the value of SELECT nextval(...) taken first.')

def busy_execute(statement):
    # DDL this function runs itself: its own event triggers leave it alone.
    GD['kcm_ddl_busy'] = True
    try:
        plpy.execute(statement)
    finally:
        GD['kcm_ddl_busy'] = False

def prepare_parents():
    for r in plpy.execute("""SELECT DISTINCT c.oid::regclass::text AS parent, c.relispartition AS is_partition FROM pg_event_trigger_ddl_commands() e JOIN pg_class c ON c.oid = e.objid
                              WHERE e.command_tag = 'CREATE TABLE' AND e.object_type = 'table' AND c.relkind = 'p' AND c.relpersistence <> 't'"""):
        prepare_parent(r['parent'], r['is_partition'])

def noted_partition_commands():
    noted = plpy.execute("SELECT current_setting('kcm.partitions', true) AS v")[0]['v']
    return json.loads(noted) if noted else []

def carry_partition_commands(commands):
    # ATTACH / DETACH PARTITION: the partition's shard table records its parent (or no
    # longer does), so that the catalog sync of the other compute nodes attaches (detaches)
    # it too; the parent's routing rule is rebuilt for the partitions it has now.
    if not commands:
        return
    conns = connect_all('ALTER TABLE')
    try:
        for verb, schema, name in commands:
            target = '%s.%s' % (qi(schema), qi(name))
            r = plpy.execute("""SELECT substr(srv.srvname, 7) AS shard, CASE WHEN c.relispartition THEN pg_get_expr(c.relpartbound, c.oid) END AS bound,
                                       (SELECT i.inhparent::regclass::text FROM pg_inherits i WHERE i.inhrelid = c.oid) AS parent,
                                       (SELECT substr(o, 8) FROM unnest(ft.ftoptions) o WHERE starts_with(o, 'dbname=')) AS rdb,
                                       (SELECT substr(o, 12) FROM unnest(ft.ftoptions) o WHERE starts_with(o, 'table_name=')) AS rtable
                                  FROM pg_class c JOIN pg_foreign_table ft ON ft.ftrelid = c.oid
                                  JOIN pg_foreign_server srv ON srv.oid = ft.ftserver AND starts_with(srv.srvname, 'shard_')
                                 WHERE c.oid = %s::regclass""" % plpy.quote_literal(target))
            if len(r) == 0:
                fail('kcm: %s is not a table of the shards; kcm attaches only tables made through a compute node; nothing was changed' % target)
            r = r[0]
            if r['shard'] not in conns:
                fail('kcm: %s is on shard %s, which is not in this cluster any more; nothing was changed' % (target, r['shard']), '55000')
            if verb == 'attach':
                prepare_parent(r['parent'])
                record = partition_record(r['parent'], r['bound'])
            else:
                record = ''
            try:
                sql(conns[r['shard']], 'ALTER TABLE %s.%s COMMENT = %%s' % (mq(r['rdb']), mq(r['rtable'])), (record,))
            except Exception as e:
                fail('kcm: shard %s refused to record that %s is %s: %s; nothing was changed' % (r['shard'], target, 'a partition' if verb == 'attach' else 'no longer a partition', e))
            if verb == 'attach':
                busy_execute("COMMENT ON TABLE %s IS 'kcm:partitioned'" % r['parent'])
                busy_execute('SELECT kcm_ddl.route_rows(%s::regclass)' % plpy.quote_literal(r['parent']))
    finally:
        close_all(conns)
    # A detached partition left its parent's routing rule naming it: rebuilt without it.
    busy_execute('SELECT kcm_ddl.reroute_parents()')
