-- CREATE DATABASE / DROP DATABASE through a compute node (called by kcm_ddl.c, which runs
-- them around PostgreSQL's own): database D is there on every compute node while some shard
-- has a D_$$_<schema> database. CREATE DATABASE D makes D_$$_public on every shard (the
-- catalog sync of the other compute nodes then makes D); DROP DATABASE D drops every
-- D_$$_% database on every shard, tables and rows with them, as PostgreSQL drops D's.
-- A refusal is returned (message, SQLSTATE) for kcm_ddl.raise_refusal, as carry_out's are.
CREATE FUNCTION kcm_ddl.shard_databases(name text, step text) RETURNS text[]
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog AS $py$
import pymysql
if len(name + '_$$_public') > 64:
    return ['kcm: MariaDB database name %s_$$_public is longer than 64 characters; use a shorter database name; nothing was changed' % name, '42622', None]
rows = plpy.execute('''SELECT substr(s.srvname, 7) AS id, s.srvoptions AS so, um.umoptions AS uo FROM pg_foreign_server s
                        JOIN pg_user_mapping um ON um.umserver = s.oid JOIN pg_roles r ON r.oid = um.umuser AND r.rolname = 'postgres'
                       WHERE starts_with(s.srvname, 'shard_') ORDER BY 1''')
if len(rows) == 0:
    return ['kcm: %s: this database has no shard servers yet (the catalog sync adds them within seconds); nothing was changed' % step, '55000', None]
mq = lambda n: '`' + n.replace('`', '``') + '`'
pattern = name.replace('\\', '\\\\').replace('_', '\\_').replace('%', '\\%') + '\\_$$\\_%'
conns = []
try:
    for s in rows:
        o = dict(x.split('=', 1) for x in list(s['so'] or []) + list(s['uo'] or []))
        try:
            c = pymysql.connect(host=o['host'], port=int(o['port']), user=o['username'], password=o.get('password', ''), connect_timeout=3, read_timeout=30, autocommit=True)
        except Exception as e:
            return ['kcm: %s %s: shard %s (%s:%s) cannot be reached: %s; nothing was changed' % (step, name, s['id'], o['host'], o['port'], e), '08006', None]
        conns.append((s['id'], c))
    found = []
    for sid, c in conns:
        with c.cursor() as cur:
            cur.execute('SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE %s', (pattern,))
            found += [(sid, c, r[0]) for r in cur.fetchall()]
    if step == 'check':
        if found:
            return ['kcm: database %s already exists in the cluster (shard %s has MariaDB database %s; made through another compute node, it appears here within seconds); nothing was created'
                    % (name, found[0][0], found[0][2]), '42P04', None]
    elif step == 'CREATE DATABASE':
        made = []
        try:
            for sid, c in conns:
                with c.cursor() as cur:
                    cur.execute('CREATE DATABASE %s DEFAULT CHARACTER SET utf8mb4' % mq(name + '_$$_public'))
                made.append(c)
        except Exception as e:
            for c in made:
                with c.cursor() as cur:
                    cur.execute('DROP DATABASE IF EXISTS %s' % mq(name + '_$$_public'))
            return ['kcm: CREATE DATABASE %s: a shard refused it: %s; nothing was created' % (name, e), '58000', None]
    elif step == 'DROP DATABASE':
        for sid, c, db in found:
            with c.cursor() as cur:
                cur.execute('DROP DATABASE IF EXISTS %s' % mq(db))
finally:
    for _, c in conns:
        c.close()
return None
$py$;

-- The shard servers of this database and their user mappings, as the statements that make
-- them again in another database (new_database.c runs them in a database CREATE DATABASE
-- just made, so that it is usable at once). Carries user-mapping passwords: superuser only.
CREATE FUNCTION kcm_ddl.shard_server_script() RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog AS $$
SELECT string_agg(statement, E';\n' ORDER BY step, name)
  FROM (SELECT 1 AS step, s.srvname::text AS name,
               format('CREATE SERVER IF NOT EXISTS %I FOREIGN DATA WRAPPER %I', s.srvname, w.fdwname) ||
               coalesce(' OPTIONS (' || (SELECT string_agg(format('%I %L', split_part(o, '=', 1), substr(o, strpos(o, '=') + 1)), ', ') FROM unnest(s.srvoptions) o) || ')', '') AS statement
          FROM pg_foreign_server s JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
         WHERE starts_with(s.srvname, 'shard_')
        UNION ALL
        SELECT 2, s.srvname || '/' || coalesce(r.rolname, 'public'),
               format('CREATE USER MAPPING IF NOT EXISTS FOR %s SERVER %I', CASE WHEN um.umuser = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END, s.srvname) ||
               coalesce(' OPTIONS (' || (SELECT string_agg(format('%I %L', split_part(o, '=', 1), substr(o, strpos(o, '=') + 1)), ', ') FROM unnest(um.umoptions) o) || ')', '')
          FROM pg_user_mapping um JOIN pg_foreign_server s ON s.oid = um.umserver LEFT JOIN pg_roles r ON r.oid = um.umuser
         WHERE starts_with(s.srvname, 'shard_')) statements
$$;
REVOKE EXECUTE ON FUNCTION kcm_ddl.shard_server_script() FROM PUBLIC;
