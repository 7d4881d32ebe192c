# CREATE SCHEMA / DROP SCHEMA: a schema S of database D is MariaDB database D_$$_S on every
# shard, so the catalog sync of every other compute node makes (and drops) it there too,
# tables or not. Marked 'kcm:schema' here, as the sync marks those it makes: a schema the
# sync may drop once no shard has its database.
SCHEMA_MARK = 'kcm:schema'

def create_schemas():
    made = plpy.execute("""SELECT DISTINCT n.nspname AS schema FROM pg_event_trigger_ddl_commands() e JOIN pg_namespace n ON n.oid = e.objid
                            WHERE e.command_tag = 'CREATE SCHEMA' AND e.object_type = 'schema' AND NOT e.in_extension""")
    if len(made) == 0:
        return
    conns = connect_all('CREATE SCHEMA')
    created = []
    try:
        for r in made:
            rdb = remote_db(r['schema'])
            found = [sid for sid, c in conns.items() if sql(c, 'SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s', (rdb,))]
            if found:
                fail('kcm: schema %s already exists in the cluster (shard %s has MariaDB database %s; made through another compute node, it appears here within seconds); nothing was created'
                     % (r['schema'], ', '.join(found), rdb), '42P06')
            for sid, c in conns.items():
                try:
                    sql(c, 'CREATE DATABASE %s DEFAULT CHARACTER SET utf8mb4' % mq(rdb))
                except Exception as e:
                    fail('kcm: shard %s refused CREATE SCHEMA %s: %s; nothing was created' % (sid, r['schema'], e))
                created.append((c, rdb))
            plpy.execute('COMMENT ON SCHEMA %s IS %s' % (qi(r['schema']), plpy.quote_literal(SCHEMA_MARK)))
    except Exception:
        # Compensate: the shards forget what this statement made (a later failure of the same
        # statement rolls the local schema back with it).
        for c, rdb in created:
            try:
                sql(c, 'DROP DATABASE IF EXISTS %s' % mq(rdb))
            except Exception:
                pass
        raise
    finally:
        close_all(conns)

def dropped_schemas():
    return [r['name'] for r in plpy.execute("""SELECT object_name AS name FROM pg_event_trigger_dropped_objects()
                                                 WHERE object_type = 'schema' AND NOT is_temporary""")]

def check_schemas_droppable(conns, schemas, dropped_tables):
    # A shard table this node has not imported yet (made through another compute node or on
    # the shard a moment ago) would be lost silently: refused, as PostgreSQL refuses to drop
    # a schema that is not empty without CASCADE.
    for s in schemas:
        rdb = database + SEP + s
        for sid, c in conns.items():
            for (t,) in sql(c, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (rdb,)):
                if (s, t) not in dropped_tables:
                    fail('kcm: schema %s still has table %s on shard %s, which this compute node has not imported yet; nothing was dropped' % (s, t, sid), '2BP01',
                         hint='Retry in a few seconds, once the catalog sync shows it here.')

def drop_schema_databases(conns, schemas):
    for s in schemas:
        for c in conns.values():
            sql(c, 'DROP DATABASE IF EXISTS %s' % mq(database + SEP + s))
