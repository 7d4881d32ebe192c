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
 * - _mysql_real_connect: a connect refused the way a dead master refuses (2002/2003/2013)
 *   waits, bounded, for the shard's foreign server to name a new master and connects there
 *   (shard_holds_follow_master), instead of failing a statement issued after the master died.
 * - the calls that send a statement (_mysql_query, _mysql_stmt_prepare/execute/store_result/
 *   fetch): a connection lost under one (2006/2013) is reported to on_lost, which raises an
 *   error saying the statement's outcome is unknown. mysql_fdw's own message ("failed to
 *   execute the MySQL query: Lost connection ...") does not say so, and its fetch ignores
 *   the error altogether (a scan cut off would return fewer rows as if there were no more).
 */
#include "postgres.h"

#include <dlfcn.h>
#include <errno.h>
#include <sys/socket.h>

#include "fmgr.h"
#include "foreign/foreign.h"

#include "shard_holds.h"
#include "shard_link.h"

typedef MYSQL *(*get_connection_fn) (ForeignServer *server, UserMapping *user, void *opt);
typedef void *(*get_options_fn) (Oid relid, bool is_foreigntable);
typedef void (*release_connection_fn) (MYSQL *conn);
typedef int (*query_fn) (MYSQL *conn, const char *sql);
typedef unsigned int (*errno_fn) (MYSQL *conn);
typedef const char *(*error_fn) (MYSQL *conn);
typedef void (*close_fn) (MYSQL *conn);
typedef unsigned long (*thread_id_fn) (MYSQL *conn);
typedef int (*socket_fn) (MYSQL *conn);
typedef MYSQL *(*connect_fn) (MYSQL *conn, const char *host, const char *user, const char *passwd, const char *db,
							  unsigned int port, const char *unix_socket, unsigned long flags);
typedef struct st_mysql_stmt MYSQL_STMT;
typedef MYSQL_STMT *(*stmt_init_fn) (MYSQL *conn);
typedef int (*stmt_prepare_fn) (MYSQL_STMT *stmt, const char *query, unsigned long length);
typedef int (*stmt_call_fn) (MYSQL_STMT *stmt);
typedef unsigned int (*stmt_errno_fn) (MYSQL_STMT *stmt);

/* CR_SERVER_GONE_ERROR, CR_SERVER_LOST: the connection is no use any more. */
#define CR_SERVER_GONE_ERROR 2006
#define CR_SERVER_LOST 2013
/* CR_CONNECTION_ERROR (socket), CR_CONN_HOST_ERROR (TCP refused or unreachable): nobody serves there. */
#define CR_CONNECTION_ERROR 2002
#define CR_CONN_HOST_ERROR 2003

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
	socket_fn	socket;
	connect_fn	connect;
	stmt_init_fn stmt_init;
	stmt_prepare_fn stmt_prepare;
	stmt_call_fn stmt_execute;
	stmt_call_fn stmt_store_result;
	stmt_call_fn stmt_fetch;
	stmt_errno_fn stmt_errno;
	shard_link_close_callback on_close;
	shard_link_lost_callback on_lost;
}			fdw;

/* Which connection each of mysql_fdw's statement handles runs on (its MYSQL_STMT is opaque here). */
#define STMT_SLOTS 64
static struct
{
	MYSQL_STMT *stmt;
	MYSQL	   *conn;
}			stmts[STMT_SLOTS];
static int	next_stmt_slot = 0;

/* What a connection's session is known to have, as the exact SET statements that set it. */
#define SESSION_SLOTS 2
#define MAX_SESSIONS 64
typedef struct Session
{
	MYSQL	   *conn;
	int			shard;			/* -1 (or 0 from memset, see session_of) until noted */
	bool		shard_known;
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

/* A call mysql_fdw made failed: a lost connection is reported (on_lost raises). */
static void
check_lost(MYSQL *conn)
{
	unsigned int code;

	if (conn == NULL || fdw.on_lost == NULL)
		return;
	code = fdw.error_number(conn);
	if (code == CR_SERVER_GONE_ERROR || code == CR_SERVER_LOST)
	{
		char		why[300];

		snprintf(why, sizeof(why), "%s (MariaDB error %u)", fdw.error_text(conn), code);
		fdw.on_lost(conn, why);
	}
}

static MYSQL *
conn_of_stmt(MYSQL_STMT *stmt)
{
	/* Newest first: a freed handle's address may come back for a later statement. */
	for (int k = 1; k <= STMT_SLOTS; k++)
	{
		int			i = (next_stmt_slot - k + STMT_SLOTS) % STMT_SLOTS;

		if (stmts[i].stmt == stmt)
			return stmts[i].conn;
	}
	return NULL;
}

static void
check_stmt_lost(MYSQL_STMT *stmt)
{
	unsigned int code = fdw.stmt_errno(stmt);

	if (code == CR_SERVER_GONE_ERROR || code == CR_SERVER_LOST)
		check_lost(conn_of_stmt(stmt));
}

static int
query_from_fdw(MYSQL *conn, const char *sql)
{
	int			rc = query_remembering_settings(conn, sql);

	if (rc != 0)
		check_lost(conn);
	return rc;
}

static MYSQL_STMT *
stmt_init_noted(MYSQL *conn)
{
	MYSQL_STMT *stmt = fdw.stmt_init(conn);

	stmts[next_stmt_slot].stmt = stmt;
	stmts[next_stmt_slot].conn = conn;
	next_stmt_slot = (next_stmt_slot + 1) % STMT_SLOTS;
	return stmt;
}

static int
stmt_prepare_watched(MYSQL_STMT *stmt, const char *query, unsigned long length)
{
	int			rc = fdw.stmt_prepare(stmt, query, length);

	if (rc != 0)
		check_stmt_lost(stmt);
	return rc;
}

static int
stmt_execute_watched(MYSQL_STMT *stmt)
{
	int			rc = fdw.stmt_execute(stmt);

	if (rc != 0)
		check_stmt_lost(stmt);
	return rc;
}

static int
stmt_store_result_watched(MYSQL_STMT *stmt)
{
	int			rc = fdw.stmt_store_result(stmt);

	if (rc != 0)
		check_stmt_lost(stmt);
	return rc;
}

/* 1 is an error (MYSQL_NO_DATA 100 and MYSQL_DATA_TRUNCATED 101 are not). */
static int
stmt_fetch_watched(MYSQL_STMT *stmt)
{
	int			rc = fdw.stmt_fetch(stmt);

	if (rc == 1)
		check_stmt_lost(stmt);
	return rc;
}

static MYSQL *
connect_following_master(MYSQL *conn, const char *host, const char *user, const char *passwd, const char *db,
						 unsigned int port, const char *unix_socket, unsigned long flags)
{
	MYSQL	   *made = fdw.connect(conn, host, user, passwd, db, port, unix_socket, flags);
	unsigned int code;

	if (made != NULL)
		return made;
	code = fdw.error_number(conn);
	if (code != CR_CONNECTION_ERROR && code != CR_CONN_HOST_ERROR && code != CR_SERVER_LOST && code != CR_SERVER_GONE_ERROR)
		return NULL;
	return shard_holds_follow_master(conn, host, port, user, passwd, db, unix_socket, flags);
}

static void
close_reported(MYSQL *conn)
{
	Session    *s = session_of(conn, false);

	if (fdw.on_close != NULL)
		fdw.on_close(conn);
	if (s != NULL)
		*s = sessions[--n_sessions];
	for (int i = 0; i < STMT_SLOTS; i++)
		if (stmts[i].conn == conn)
			stmts[i].stmt = NULL, stmts[i].conn = NULL;
	fdw.close(conn);
}

/* The address of mysql_fdw's pointer `name`, which must be set. */
static void **
fdw_slot(void *handle, const char *name)
{
	void	  **slot = (void **) dlsym(handle, name);

	return slot != NULL && *slot != NULL ? slot : NULL;
}

void
shard_link_bind(shard_link_close_callback on_close, shard_link_lost_callback on_lost)
{
	void	   *handle = NULL;
	void	  **client_library;
	close_fn   *close_slot;
	query_fn   *query_slot;
	void	  **connect_slot;
	void	  **init_slot;
	void	  **prepare_slot;
	void	  **execute_slot;
	void	  **store_slot;
	void	  **fetch_slot;
	void	  **stmt_errno_slot;

	if (on_close != NULL)
		fdw.on_close = on_close;
	if (on_lost != NULL)
		fdw.on_lost = on_lost;
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
	fdw.socket = client_library != NULL && *client_library != NULL ? (socket_fn) dlsym(*client_library, "mysql_get_socket") : NULL;
	query_slot = (query_fn *) dlsym(handle, "_mysql_query");
	close_slot = (close_fn *) dlsym(handle, "_mysql_close");
	connect_slot = fdw_slot(handle, "_mysql_real_connect");
	init_slot = fdw_slot(handle, "_mysql_stmt_init");
	prepare_slot = fdw_slot(handle, "_mysql_stmt_prepare");
	execute_slot = fdw_slot(handle, "_mysql_stmt_execute");
	store_slot = fdw_slot(handle, "_mysql_stmt_store_result");
	fetch_slot = fdw_slot(handle, "_mysql_stmt_fetch");
	stmt_errno_slot = fdw_slot(handle, "_mysql_stmt_errno");
	if (fdw.get_options == NULL || fdw.release_connection == NULL || fdw.error_number == NULL || fdw.error_text == NULL || fdw.thread_id == NULL ||
		fdw.socket == NULL || query_slot == NULL || *query_slot == NULL || close_slot == NULL || *close_slot == NULL || connect_slot == NULL ||
		init_slot == NULL || prepare_slot == NULL || execute_slot == NULL || store_slot == NULL || fetch_slot == NULL || stmt_errno_slot == NULL)
		ereport(ERROR,
				(errmsg("kcm: this mysql_fdw does not export what kcm's shard transactions need"),
				 errdetail("mysql_get_options, mysql_release_connection, mysql_dll_handle and the _mysql_* client pointers of mysql_fdw 2.8")));
	fdw.query = *query_slot;
	*query_slot = query_from_fdw;
	fdw.close = *close_slot;
	*close_slot = close_reported;
	fdw.connect = (connect_fn) *connect_slot;
	*connect_slot = (void *) connect_following_master;
	fdw.stmt_init = (stmt_init_fn) *init_slot;
	*init_slot = (void *) stmt_init_noted;
	fdw.stmt_prepare = (stmt_prepare_fn) *prepare_slot;
	*prepare_slot = (void *) stmt_prepare_watched;
	fdw.stmt_execute = (stmt_call_fn) *execute_slot;
	*execute_slot = (void *) stmt_execute_watched;
	fdw.stmt_store_result = (stmt_call_fn) *store_slot;
	*store_slot = (void *) stmt_store_result_watched;
	fdw.stmt_fetch = (stmt_call_fn) *fetch_slot;
	*fetch_slot = (void *) stmt_fetch_watched;
	fdw.stmt_errno = (stmt_errno_fn) *stmt_errno_slot;
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

bool
shard_link_alive(MYSQL *conn)
{
	int			fd = fdw.socket(conn);
	char		byte;
	ssize_t		got;

	if (fd < 0)
		return false;
	got = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
	/* 0: the shard closed it (a killed mariadbd's kernel does); > 0: bytes nobody asked for (a KILL's error packet). */
	if (got >= 0)
		return false;
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

void
shard_link_note_shard(MYSQL *conn, int shard)
{
	Session    *s = session_of(conn, true);

	if (s == NULL)
		return;
	s->shard = shard;
	s->shard_known = true;
}

int
shard_link_shard_of(MYSQL *conn)
{
	Session    *s = session_of(conn, false);

	return s != NULL && s->shard_known ? s->shard : -1;
}

MYSQL *
shard_link_connect(MYSQL *conn, const char *host, const char *user, const char *passwd, const char *db,
				   unsigned int port, const char *unix_socket, unsigned long flags)
{
	return fdw.connect(conn, host, user, passwd, db, port, unix_socket, flags);
}
