import hashlib
import json
import re
import pymysql

class Refusal(Exception):
    """A statement kcm refuses: reported by the trigger as a plain ERROR with an SQLSTATE and hint."""
    def __init__(self, message, code='0A000', hint=None):
        Exception.__init__(self, message)
        self.code, self.hint = code, hint

def fail(message, code='0A000', hint=None):
    raise Refusal(message, code, hint)

if (plpy.execute("SELECT current_setting('kcm.sync', true) AS v")[0]['v'] or '') == 'on':
    return
if GD.get('kcm_ddl_busy'):
    return  # DDL this function runs itself

SEP = '_$$_'
database = plpy.execute('SELECT current_database() AS d')[0]['d']

def qi(name):
    return plpy.quote_ident(name)

def mq(name):
    return '`' + name.replace('`', '``') + '`'

def shards():
    rows = plpy.execute("""
        SELECT substr(s.srvname, 7) AS id, s.srvoptions AS so, um.umoptions AS uo
          FROM pg_foreign_server s
          JOIN pg_user_mapping um ON um.umserver = s.oid
          JOIN pg_roles r ON r.oid = um.umuser AND r.rolname = 'postgres'
         WHERE starts_with(s.srvname, 'shard_')
         ORDER BY length(s.srvname), s.srvname""")
    found = []
    for r in rows:
        o = dict(x.split('=', 1) for x in list(r['so'] or []) + list(r['uo'] or []))
        found.append({'id': r['id'], 'host': o.get('host'), 'port': int(o.get('port', '0')), 'user': o.get('username'), 'password': o.get('password', '')})
    if not found:
        fail('kcm: database %s has no shard servers yet (the catalog sync adds them within seconds of CREATE DATABASE); nothing was changed' % database, '55000')
    return found

def connect_all(what):
    conns = {}
    try:
        for s in shards():
            try:
                # 3 s for the connection and handshake (a stopped master accepts TCP but never greets);
                # then up to 10 min for one statement (an ALTER TABLE of a big table).
                c = pymysql.connect(host=s['host'], port=s['port'], user=s['user'], password=s['password'],
                                    connect_timeout=3, read_timeout=3, write_timeout=30, autocommit=True, charset='utf8mb4')
                c._read_timeout = 600
                conns[s['id']] = c
            except Exception as e:
                fail('kcm: %s: shard %s (%s:%d) cannot be reached: %s; nothing was changed' % (what, s['id'], s['host'], s['port'], e), '08006')
    except Exception:
        for c in conns.values():
            c.close()
        raise
    return conns

def close_all(conns):
    for c in conns.values():
        try:
            c.close()
        except Exception:
            pass

def sql(conn, statement, args=None):
    with conn.cursor() as cur:
        cur.execute(statement, args)
        return cur.fetchall()

def remote_db(schema):
    rdb = database + SEP + schema
    if len(rdb) > 64:
        fail('kcm: MariaDB database name %s is longer than 64 characters; use a shorter database or schema name' % rdb)
    return rdb

def holders(conns, rdb, table):
    return [sid for sid, c in conns.items()
            if sql(c, 'SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s', (rdb, table))]

# PostgreSQL type (format_type) -> MariaDB type. Only types that mysql_fdw imports back as
