/*
 * new_database: CREATE DATABASE D through a compute node leaves D usable at once.
 *
 * CREATE TABLE in D reaches a shard through D's foreign servers shard_<id> and their user
 * mappings (sql/10-carry-out-begin.sql, shards()). The catalog sync makes them in every
 * database, but only on its next round after D appears, so a setup script running
 * `CREATE DATABASE D; \c D; CREATE TABLE ...` was refused ("database D has no shard servers
 * yet"). PostgreSQL cannot run a statement in another database from this session, so the
 * statement copies the servers itself: it reads this database's shard servers and user
 * mappings (the ones the sync keeps current: same shards, same credentials, in every
 * database) and makes them in D over a libpq session of the superuser on this node's own
 * unix socket (peer authentication, as the agent's session: pg_hba.conf and pg_ident.conf
 * of config.ts).
 *
 * D exists for another session only once CREATE DATABASE's transaction commits, and
 * PostgreSQL 15 holds an exclusive lock on D until then (WAL_LOG strategy), so that session
 * would wait for us while we wait for it. The statement therefore commits first and starts
 * a new transaction, as VACUUM does (CREATE DATABASE is refused inside a transaction block,
 * so there is no enclosing transaction to break). What was made before the commit is
 * final either way: PostgreSQL's database and the shards' D_$$_public.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "new_database.h"

#define ATTEMPTS 3

/* This database's shard servers and user mappings as statements; NULL when it has none. */
static char *
shard_server_script(void)
{
	Oid			save_user;
	int			save_sec;
	char	   *script = NULL;

	/* The user mappings' passwords are the superuser's to read: the function is not granted to PUBLIC. */
	GetUserIdAndSecContext(&save_user, &save_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	SPI_connect();
	/* A database whose kcm_ddl predates the function: left to the catalog sync, as before. */
	if (SPI_execute("SELECT 1 FROM pg_proc WHERE oid = to_regprocedure('kcm_ddl.shard_server_script()')", true, 1) != SPI_OK_SELECT)
		elog(ERROR, "kcm: looking up kcm_ddl.shard_server_script failed");
	if (SPI_processed == 0)
	{
		SPI_finish();
		SetUserIdAndSecContext(save_user, save_sec);
		ereport(WARNING,
				(errmsg("kcm: kcm_ddl in this database is older than CREATE DATABASE's copy of the shard servers"),
				 errhint("The catalog sync adds them to the new database within seconds.")));
		return NULL;
	}
	if (SPI_execute("SELECT kcm_ddl.shard_server_script()", true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "kcm: reading this database's shard servers failed");
	{
		char	   *value = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (value != NULL)
			script = MemoryContextStrdup(TopMemoryContext, value);
	}
	SPI_finish();
	SetUserIdAndSecContext(save_user, save_sec);
	return script;
}

/* The first of unix_socket_directories: where this postmaster listens for local sessions. */
static char *
socket_directory(void)
{
	char	   *dirs = pstrdup(Unix_socket_directories ? Unix_socket_directories : "");
	char	   *end = strchr(dirs, ',');

	if (end != NULL)
		*end = '\0';
	while (*dirs == ' ')
		dirs++;
	for (end = dirs + strlen(dirs); end > dirs && end[-1] == ' '; end--)
		end[-1] = '\0';
	return dirs;
}

/* Runs the script in database dbname as the superuser; NULL on success, else why not (palloc'd). */
static char *
run_in_database(const char *dbname, const char *script)
{
	char		port[16];
	const char *keys[] = {"host", "port", "dbname", "user", "application_name", "connect_timeout", "options", NULL};
	const char *values[8];
	PGconn	   *conn;
	PGresult   *result;
	char	   *why = NULL;
	StringInfoData sql;

	snprintf(port, sizeof(port), "%d", PostPortNumber);
	values[0] = socket_directory();
	values[1] = port;
	values[2] = dbname;
	values[3] = GetUserNameFromId(BOOTSTRAP_SUPERUSERID, false);
	values[4] = "kcm_ddl: CREATE DATABASE";
	values[5] = "10";
	values[6] = "-c statement_timeout=30000";
	values[7] = NULL;
	conn = PQconnectdbParams(keys, values, false);
	if (PQstatus(conn) != CONNECTION_OK)
	{
		why = pstrdup(PQerrorMessage(conn));
		PQfinish(conn);
		return why;
	}
	/* kcm.sync: the servers follow the shards, as the catalog sync's own changes do. */
	initStringInfo(&sql);
	appendStringInfo(&sql, "SET kcm.sync = on; BEGIN; %s; COMMIT", script);
	result = PQexec(conn, sql.data);
	if (PQresultStatus(result) != PGRES_COMMAND_OK)
		why = pstrdup(PQresultErrorMessage(result));
	PQclear(result);
	PQfinish(conn);
	return why;
}

void
give_new_database_shard_servers(const char *dbname)
{
	char	   *script = shard_server_script();
	char	   *name = pstrdup(dbname);
	MemoryContext context = CurrentMemoryContext;
	char	   *why = NULL;

	if (script == NULL)
		return;
	if (ActiveSnapshotSet())
		PopActiveSnapshot();
	CommitTransactionCommand();
	StartTransactionCommand();
	MemoryContextSwitchTo(context);
	/* A catalog sync round making the same servers at the same moment fails one of the two: try again. */
	for (int attempt = 1; attempt <= ATTEMPTS; attempt++)
	{
		why = run_in_database(name, script);
		if (why == NULL)
			break;
		CHECK_FOR_INTERRUPTS();
		if (attempt < ATTEMPTS)
			pg_usleep(200000L);
	}
	pfree(script);
	if (why != NULL)
		ereport(WARNING,
				(errmsg("kcm: database %s was made, but its shard servers were not: %s", name, why),
				 errhint("The catalog sync adds them within seconds; until then CREATE TABLE in %s is refused.", name)));
}
