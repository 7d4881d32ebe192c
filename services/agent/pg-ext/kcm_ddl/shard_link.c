/*
 * shard_link: kcm_ddl's hold on mysql_fdw 2.8's shard connections (shard_link.h).
 *
 * mysql_fdw dlopens the MariaDB client library and calls it through exported function
 * pointers (_mysql_query, _mysql_close, ...); its connection cache is reached through its
 * exported mysql_get_connection / mysql_release_connection. This file binds to those,
 * and swaps two of the pointers for wrappers:
 *
 * - _mysql_close: every connection mysql_fdw closes (a lost shard, a foreign server whose
 *   options changed after a failover) is reported first, so a shard transaction on it is
 *   known to be gone instead of running on a freed connection.
 * - _mysql_query: mysql_fdw sends `SET sql_mode = '...'` before every plan, scan and
 *   inserted row, the same value each time; a connection that already has that sql_mode
 *   is not sent it again (1 to 2 shard round trips fewer per statement). Session settings
 *   are not transactional and nothing else changes them on these connections; a closed
 *   connection's remembered settings are forgotten, so a new one at the same address
 *   starts clean.
 */
#include "postgres.h"

#include <dlfcn.h>

#include "fmgr.h"
#include "foreign/foreign.h"

#include "shard_link.h"

typedef MYSQL *(*get_connection_fn) (ForeignServer *server, UserMapping *user, void *opt);
typedef void *(*get_options_fn) (Oid relid, bool is_foreigntable);
typedef void (*release_connection_fn) (MYSQL *conn);
typedef int (*query_fn) (MYSQL *conn, const char *sql);
typedef unsigned int (*errno_fn) (MYSQL *conn);
typedef const char *(*error_fn) (MYSQL *conn);
typedef void (*close_fn) (MYSQL *conn);
typedef unsigned long (*thread_id_fn) (MYSQL *conn);

/* CR_SERVER_GONE_ERROR, CR_SERVER_LOST: the connection is no use any more. */
#define CR_SERVER_GONE_ERROR 2006
#define CR_SERVER_LOST 2013

static struct
{
	bool		bound;
	get_connection_fn get_connection;
	get_options_fn get_options;
	release_connection_fn release_connection;
	query_fn	query;
	errno_fn	error_number;
	error_fn	error_text;
	close_fn	close;
	thread_id_fn thread_id;
	shard_link_close_callback on_close;
}			fdw;

/* What a connection's session is known to have, as the exact SET statements that set it. */
#define SESSION_SLOTS 2
#define MAX_SESSIONS 64
typedef struct Session
{
	MYSQL	   *conn;
	char		settings[SESSION_SLOTS][256];
} Session;
static Session sessions[MAX_SESSIONS];
static int	n_sessions = 0;

static const char *const setting_prefixes[SESSION_SLOTS] = {"SET sql_mode = ", "SET SESSION TRANSACTION ISOLATION LEVEL "};

static int
slot_of(const char *sql)
{
	for (int i = 0; i < SESSION_SLOTS; i++)
		if (strncmp(sql, setting_prefixes[i], strlen(setting_prefixes[i])) == 0)
			return i;
	return -1;
}

static Session *
session_of(MYSQL *conn, bool make)
{
	for (int i = 0; i < n_sessions; i++)
		if (sessions[i].conn == conn)
			return &sessions[i];
	if (!make || n_sessions == MAX_SESSIONS)
		return NULL;
	memset(&sessions[n_sessions], 0, sizeof(Session));
	sessions[n_sessions].conn = conn;
	return &sessions[n_sessions++];
}

/* A SET the session already has returns at once; any other statement goes to the shard. */
static int
query_remembering_settings(MYSQL *conn, const char *sql)
{
	int			slot = slot_of(sql);
	Session    *s;
	int			rc;

	if (slot < 0)
		return fdw.query(conn, sql);
	s = session_of(conn, false);
	if (s != NULL && strcmp(s->settings[slot], sql) == 0)
		return 0;
	rc = fdw.query(conn, sql);
	s = session_of(conn, rc == 0);
	if (s != NULL)
	{
		if (rc == 0 && strlen(sql) < sizeof(s->settings[slot]))
			strlcpy(s->settings[slot], sql, sizeof(s->settings[slot]));
		else
			s->settings[slot][0] = '\0';
	}
	return rc;
}

static void
close_reported(MYSQL *conn)
{
	Session    *s = session_of(conn, false);

	if (fdw.on_close != NULL)
		fdw.on_close(conn);
	if (s != NULL)
		*s = sessions[--n_sessions];
	fdw.close(conn);
}

void
shard_link_bind(shard_link_close_callback on_close)
{
	void	   *handle = NULL;
	void	  **client_library;
	close_fn   *close_slot;
	query_fn   *query_slot;

	if (on_close != NULL)
		fdw.on_close = on_close;
	if (fdw.bound)
		return;
	fdw.get_connection = (get_connection_fn) load_external_function("mysql_fdw", "mysql_get_connection", true, &handle);
	fdw.get_options = (get_options_fn) dlsym(handle, "mysql_get_options");
	fdw.release_connection = (release_connection_fn) dlsym(handle, "mysql_release_connection");
	fdw.error_number = *(errno_fn *) dlsym(handle, "_mysql_errno");
	fdw.error_text = *(error_fn *) dlsym(handle, "_mysql_error");
	/* mysql_thread_id is not among mysql_fdw's pointers: from the client library it loaded. */
	client_library = (void **) dlsym(handle, "mysql_dll_handle");
	fdw.thread_id = client_library != NULL && *client_library != NULL ? (thread_id_fn) dlsym(*client_library, "mysql_thread_id") : NULL;
	query_slot = (query_fn *) dlsym(handle, "_mysql_query");
	close_slot = (close_fn *) dlsym(handle, "_mysql_close");
	if (fdw.get_options == NULL || fdw.release_connection == NULL || fdw.error_number == NULL || fdw.error_text == NULL || fdw.thread_id == NULL ||
		query_slot == NULL || *query_slot == NULL || close_slot == NULL || *close_slot == NULL)
		ereport(ERROR,
				(errmsg("kcm: this mysql_fdw does not export what kcm's shard transactions need"),
				 errdetail("mysql_get_options, mysql_release_connection, mysql_dll_handle and the _mysql_* client pointers of mysql_fdw 2.8")));
	fdw.query = *query_slot;
	*query_slot = query_remembering_settings;
	fdw.close = *close_slot;
	*close_slot = close_reported;
	fdw.bound = true;
}

MYSQL *
shard_link_connection(Oid relid, ForeignServer *server, UserMapping *mapping)
{
	return fdw.get_connection(server, mapping, fdw.get_options(relid, true));
}

bool
shard_link_query(MYSQL *conn, const char *sql, char *why, size_t why_len, bool *gone)
{
	unsigned int code;

	*gone = false;
	if (query_remembering_settings(conn, sql) == 0)
		return true;
	code = fdw.error_number(conn);
	snprintf(why, why_len, "%s (MariaDB error %u)", fdw.error_text(conn), code);
	if (code == CR_SERVER_GONE_ERROR || code == CR_SERVER_LOST)
	{
		*gone = true;
		shard_link_release(conn);
	}
	return false;
}

unsigned long
shard_link_session_id(MYSQL *conn)
{
	return fdw.thread_id(conn);
}

void
shard_link_release(MYSQL *conn)
{
	fdw.release_connection(conn);
}
