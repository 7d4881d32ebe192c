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

