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

def retyped_columns():
    noted = plpy.execute("SELECT current_setting('kcm.retyped', true) AS v")[0]['v']
    return set(json.loads(noted)) if noted else set()

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
    # ALTER COLUMN ... TYPE: the columns kcm_ddl.c noted; each is given its new MariaDB type
    # (an unmappable one is refused here, so the local change rolls back with the statement).
    changes += ['MODIFY COLUMN %s' % column_definition(c, qualified) for c in cols if c['name'] in retyped_columns() and c['name'] in remote]
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

