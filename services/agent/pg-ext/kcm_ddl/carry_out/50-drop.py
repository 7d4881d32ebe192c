def drop_tables():
    gone = plpy.execute("""SELECT schema_name AS schema, object_name AS name FROM pg_event_trigger_dropped_objects()
                            WHERE object_type = 'foreign table' AND NOT is_temporary""")
    schemas = dropped_schemas()
    if len(gone) == 0 and len(schemas) == 0:
        return
    conns = connect_all('DROP')
    try:
        check_schemas_droppable(conns, schemas, set((r['schema'], r['name']) for r in gone))
        for r in gone:
            rdb = database + SEP + r['schema']
            for sid in holders(conns, rdb, r['name']):
                sql(conns[sid], 'DROP TABLE IF EXISTS %s.%s' % (mq(rdb), mq(r['name'])))
        drop_schema_databases(conns, schemas)
    finally:
        close_all(conns)
    # A partition dropped on its own took its parent's routing rules with it (CASCADE).
    plpy.execute('SELECT kcm_ddl.reroute_parents()')

