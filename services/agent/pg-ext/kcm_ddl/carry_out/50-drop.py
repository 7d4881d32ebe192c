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
    # A partition dropped on its own took its parent's routing rules with it (CASCADE).
    plpy.execute('SELECT kcm_ddl.reroute_parents()')

