/*
 * shard_link.c: kcm_ddl's hold on mysql_fdw 2.8's shard connections (one per foreign server
 * and user mapping, cached per backend): the same connections mysql_fdw's scans and writes
 * use, so a transaction opened on one covers them.
 */
#ifndef KCM_SHARD_LINK_H
#define KCM_SHARD_LINK_H

#include "foreign/foreign.h"

typedef struct st_mysql MYSQL;

/* Called with every connection about to be closed, by mysql_fdw or by shard_link_release. */
typedef void (*shard_link_close_callback) (MYSQL *conn);
/*
 * Called when a statement mysql_fdw sent was cut off by a lost connection (2006/2013): it
 * raises the client's error (whether the statement took effect is unknown). Not called for
 * kcm's own statements (shard_link_query), whose callers judge a loss themselves.
 */
typedef void (*shard_link_lost_callback) (MYSQL *conn, const char *why);

/*
 * Finds mysql_fdw's functions (loading it if need be) and routes through here its close, its
 * SET sql_mode, its connect (a refused one waits for the shard's new master:
 * shard_holds_follow_master) and every call that sends a statement (a lost connection
 * calls on_lost). Idempotent.
 */
extern void shard_link_bind(shard_link_close_callback on_close, shard_link_lost_callback on_lost);
/* mysql_fdw's connection for a foreign table of server as mapping (made if there is none, or if its server changed). */
extern MYSQL *shard_link_connection(Oid relid, ForeignServer *server, UserMapping *mapping);
/*
 * Runs a statement that returns no rows; false with the shard's error in why; *gone when
 * the connection is lost (and then closed). A session setting the connection already has
 * (`SET SESSION TRANSACTION ISOLATION LEVEL ...`, `SET sql_mode = ...`) is not sent again.
 */
extern bool shard_link_query(MYSQL *conn, const char *sql, char *why, size_t why_len, bool *gone);
/* The shard's id for this connection's session (CONNECTION_ID()), with no round trip. */
extern unsigned long shard_link_session_id(MYSQL *conn);
/* Closes the connection through mysql_fdw, which makes a new one at its next use. */
extern void shard_link_release(MYSQL *conn);
/* False when the connection's socket is closed at the shard's end (or has unasked-for bytes: a KILL's error). No round trip. */
extern bool shard_link_alive(MYSQL *conn);
/* Remembers which shard a connection reaches (for errors); shard_link_shard_of answers -1 when unknown. */
extern void shard_link_note_shard(MYSQL *conn, int shard);
extern int	shard_link_shard_of(MYSQL *conn);
/* The client library's mysql_real_connect, not waited through. */
extern MYSQL *shard_link_connect(MYSQL *conn, const char *host, const char *user, const char *passwd, const char *db,
								 unsigned int port, const char *unix_socket, unsigned long flags);

#endif
