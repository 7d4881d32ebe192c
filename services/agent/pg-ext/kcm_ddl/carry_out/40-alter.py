def altered_foreign_tables():
    # The foreign tables the statement altered, and those under a partitioned table it
    # altered (PostgreSQL applies ALTER TABLE <parent> to every partition).
    return plpy.execute("""
        WITH RECURSIVE altered AS (
               SELECT e.objid AS relid FROM pg_event_trigger_ddl_commands() e
                WHERE e.classid = 'pg_class'::regclass AND e.command_tag IN ('ALTER TABLE', 'ALTER FOREIGN TABLE')
               UNION
               SELECT i.inhrelid FROM pg_inherits i JOIN altered a ON i.inhparent = a.relid)
        SELECT DISTINCT c.oid AS relid, n.nspname AS schema, c.relname AS name, substr(srv.srvname, 7) AS shard,
               (SELECT substr(o, 8) FROM unnest(ft.ftoptions) o WHERE starts_with(o, 'dbname=')) AS rdb,
               (SELECT substr(o, 12) FROM unnest(ft.ftoptions) o WHERE starts_with(o, 'table_name=')) AS rtable
          FROM altered a
          JOIN pg_class c ON c.oid = a.relid
          JOIN pg_namespace n ON n.oid = c.relnamespace
          JOIN pg_foreign_table ft ON ft.ftrelid = c.oid
          JOIN pg_foreign_server srv ON srv.oid = ft.ftserver AND starts_with(srv.srvname, 'shard_')""")

def altered_parents():
    return [r['t'] for r in plpy.execute("""SELECT DISTINCT c.oid::regclass::text AS t FROM pg_event_trigger_ddl_commands() e JOIN pg_class c ON c.oid = e.objid
                                              WHERE e.classid = 'pg_class'::regclass AND e.command_tag = 'ALTER TABLE' AND c.relkind = 'p'
                                                AND obj_description(c.oid, 'pg_class') = 'kcm:partitioned'""")]

def alter_tables():
    for parent in altered_partitioned():
        check_key_defaults(parent, partition_key(parent))
    altered = altered_foreign_tables()
    if len(altered) > 0:
        conns = connect_all('ALTER TABLE')
        try:
            # Every table's shard change is worked out (and an unmappable type refused) before
            # any shard is touched; one a shard refuses undoes those already made.
            plans = [plan_alter(conns, dict(r)) for r in altered]
            done = []
            try:
                for plan in plans:
                    apply_alter(plan)
                    done.append(plan)
            except Exception:
                for plan in reversed(done):
                    undo_alter(plan)
                raise
            for plan in plans:
                refresh_foreign_table(plan)
        finally:
            close_all(conns)
    # The parent's routing rules name its columns: rebuilt for the columns it has now.
    for parent in altered_parents():
        GD['kcm_ddl_busy'] = True
        try:
            plpy.execute('SELECT kcm_ddl.route_rows(%s::regclass)' % plpy.quote_literal(parent))
        finally:
            GD['kcm_ddl_busy'] = False

def altered_partitioned():
    return [r['t'] for r in plpy.execute("""SELECT DISTINCT c.oid::regclass::text AS t FROM pg_event_trigger_ddl_commands() e JOIN pg_class c ON c.oid = e.objid
                                              WHERE e.classid = 'pg_class'::regclass AND e.command_tag = 'ALTER TABLE' AND c.relkind = 'p'""")]

def noted_columns(setting):
    # Set by kcm_ddl.c for every ALTER of a foreign table (note_column_changes).
    noted = plpy.execute("SELECT current_setting(%s, true) AS v" % plpy.quote_literal(setting))[0]['v']
    return set(json.loads(noted)) if noted else set()

def retyped_columns():
    return noted_columns('kcm.retyped')

def plan_alter(conns, rel):
    # The foreign table already has the user's change; the shard table is to match it: a new
    # name or schema is a RENAME TABLE, then columns are compared by name and position.
    qualified = '%s.%s' % (rel['schema'], rel['name'])
    if rel['shard'] not in conns:
        fail('kcm: %s is on shard %s, which is not in this cluster any more; nothing was changed' % (qualified, rel['shard']), '55000')
    conn = conns[rel['shard']]
    rdb, rtable = remote_db(rel['schema']), rel['name']
    if (rdb, rtable) != (rel['rdb'], rel['rtable']) and holders(conns, rdb, rtable):
        fail('kcm: a shard already has a table %s.%s; nothing was changed' % (rdb, rtable), '42P07')
    cols, _ = column_definitions(rel['relid'], qualified, check=False)
    local = [c['name'] for c in cols]
    before = sql(conn, 'SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION', (rel['rdb'], rel['rtable']))
    remote = [r[0] for r in before]
    added = [c for c in cols if c['name'] not in remote]
    removed = [n for n in remote if n not in local]
    changes, undo = [], []
    if len(added) == 1 and len(removed) == 1 and local.index(added[0]['name']) == remote.index(removed[0]):
        changes.append('RENAME COLUMN %s TO %s' % (mq(removed[0]), mq(added[0]['name'])))
        undo.append('RENAME COLUMN %s TO %s' % (mq(added[0]['name']), mq(removed[0])))
    else:
        changes += ['DROP COLUMN %s' % mq(n) for n in removed]
        changes += ['ADD COLUMN %s' % column_definition(c, qualified) for c in added]
        undo += ['DROP COLUMN %s' % mq(c['name']) for c in added]
    # ALTER COLUMN ... TYPE: the columns kcm_ddl.c noted; each is given its new MariaDB type
    # (an unmappable one is refused here, so the local change rolls back with the statement).
    retyped, defaulted = retyped_columns(), noted_columns('kcm.defaulted')
    for c in cols:
        if c['name'] in retyped and c['name'] in remote:
            changes.append('MODIFY COLUMN %s' % column_definition(c, qualified))
            old = before[remote.index(c['name'])]
            undo.append('MODIFY COLUMN %s %s %s' % (mq(old[0]), old[1], 'NULL' if old[2] == 'YES' else 'NOT NULL'))
        elif c['name'] in defaulted and c['name'] in remote:
            # ALTER COLUMN ... SET/DROP DEFAULT: the shard column's default, so that every
            # compute node's foreign table (and partitioned parent) gets it from the sync.
            d = mariadb_default(c['dflt'])
            if d is False:
                fail('kcm: column %s.%s has default %s; kcm carries constant defaults only (the shard table, and the other compute nodes, could not hold it); nothing was changed' % (qualified, c['name'], c['dflt']))
            old = before[remote.index(c['name'])]
            changes.append('ALTER COLUMN %s %s' % (mq(c['name']), 'DROP DEFAULT' if d is None else 'SET DEFAULT ' + d))
            undo.append('ALTER COLUMN %s %s' % (mq(c['name']), 'DROP DEFAULT' if old[3] is None else 'SET DEFAULT ' + old[3]))
    return {'rel': rel, 'qualified': qualified, 'conn': conn, 'rdb': rdb, 'rtable': rtable, 'cols': cols,
            'removed': removed, 'changes': changes, 'undo': undo, 'renamed': False}

def apply_alter(plan):
    rel, conn, rdb, rtable = plan['rel'], plan['conn'], plan['rdb'], plan['rtable']
    if (rdb, rtable) != (rel['rdb'], rel['rtable']):
        sql(conn, 'CREATE DATABASE IF NOT EXISTS %s DEFAULT CHARACTER SET utf8mb4' % mq(rdb))
        sql(conn, 'RENAME TABLE %s.%s TO %s.%s' % (mq(rel['rdb']), mq(rel['rtable']), mq(rdb), mq(rtable)))
        plan['renamed'] = True
    if plan['changes']:
        try:
            sql(conn, 'ALTER TABLE %s.%s %s' % (mq(rdb), mq(rtable), ', '.join(plan['changes'])))
        except Exception as e:
            if plan['renamed']:
                sql(conn, 'RENAME TABLE %s.%s TO %s.%s' % (mq(rdb), mq(rtable), mq(rel['rdb']), mq(rel['rtable'])))
            fail('kcm: shard %s refused ALTER TABLE %s (%s): %s; nothing was changed' % (rel['shard'], plan['qualified'], ', '.join(plan['changes']), e))

def undo_alter(plan):
    # Best effort, in reverse: a dropped column cannot come back (its data is gone), which is
    # why every table's change is planned, and its types mapped, before any is applied.
    rel, conn, rdb, rtable = plan['rel'], plan['conn'], plan['rdb'], plan['rtable']
    try:
        if plan['undo']:
            sql(conn, 'ALTER TABLE %s.%s %s' % (mq(rdb), mq(rtable), ', '.join(plan['undo'])))
        if plan['renamed']:
            sql(conn, 'RENAME TABLE %s.%s TO %s.%s' % (mq(rdb), mq(rtable), mq(rel['rdb']), mq(rel['rtable'])))
    except Exception as e:
        plpy.warning('kcm: could not undo ALTER TABLE %s on shard %s: %s' % (plan['qualified'], rel['shard'], e))

def refresh_foreign_table(plan):
    rel, conn, rdb, rtable = plan['rel'], plan['conn'], plan['rdb'], plan['rtable']
    target = '%s.%s' % (qi(rel['schema']), qi(rel['name']))
    GD['kcm_ddl_busy'] = True
    try:
        if plan['renamed']:
            plpy.execute('ALTER FOREIGN TABLE %s OPTIONS (SET dbname %s, SET table_name %s)' % (target, plpy.quote_literal(rdb), plpy.quote_literal(rtable)))
        if plan['removed']:
            # mysql_fdw sends INSERT values by attribute number and gets them wrong once a
            # column was dropped: the foreign table is made afresh, with what it carried (a
            # partition as a partition of its parent again, whose rules alter_tables rebuilds).
            info = plpy.execute("""SELECT pg_get_userbyid(c.relowner) AS owner, CASE WHEN c.relispartition THEN pg_get_expr(c.relpartbound, c.oid) END AS bound,
                                          (SELECT i.inhparent::regclass::text FROM pg_inherits i WHERE i.inhrelid = c.oid) AS parent
                                     FROM pg_class c WHERE c.oid = %d""" % rel['relid'])[0]
            fresh = {'schema': rel['schema'], 'name': rel['name'], 'bound': info['bound'], 'parent': info['parent'], 'cols': plan['cols'], 'foreign': True, 'reroute': False}
            replace_with_foreign(fresh, rdb, rel['shard'], signature(conn, rdb, rtable), info['owner'])
        else:
            plpy.execute('COMMENT ON FOREIGN TABLE %s IS %s' % (target, plpy.quote_literal('kcm:' + signature(conn, rdb, rtable))))
    finally:
        GD['kcm_ddl_busy'] = False
