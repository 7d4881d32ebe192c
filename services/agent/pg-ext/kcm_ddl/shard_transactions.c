/*
 * shard_transactions: a compute node's PostgreSQL transaction is a transaction on every
 * shard it touches (DESIGN.md section 12; README "Transactions through compute nodes").
 *
 * mysql_fdw 2.8 keeps one MariaDB connection per (foreign server, user mapping) in a
 * backend-local cache and leaves each in autocommit, so every statement it sends commits
 * on its own: ROLLBACK undid nothing, and the SELECT ... FOR UPDATE it sends before an
 * UPDATE released its locks at once (concurrent `v = v + 1` lost updates). This module
 * drives those same connections from PostgreSQL's transaction events:
 *
 * - Before a statement runs (ExecutorStart), each shard connection it will use joins the
 *   transaction: the first one becomes the coordinator and runs a plain local transaction
 *   (START TRANSACTION); every later one is an XA branch (XA START). Joining happens in a
 *   transaction block, for writes and locking reads, and whenever a shard transaction is
 *   already open. An autocommit read, and an autocommit single-row INSERT VALUES (one
 *   statement on one shard, atomic by itself), stay in autocommit at no extra round trip.
 * - PostgreSQL's isolation level is the shard's (READ COMMITTED by default, as PostgreSQL).
 * - Savepoints follow PostgreSQL's subtransactions (SAVEPOINT s<level> on the shard as a
 *   connection first works at that level; ROLLBACK TO on subtransaction abort). A shard that
 *   lost its transaction under a savepoint (a deadlock rolls back the whole shard
 *   transaction) fails every later statement and the commit.
 * - Commit: one shard written commits in one phase (COMMIT, or XA COMMIT ... ONE PHASE).
 *   Two or more: every written XA branch is prepared; then the coordinator inserts the
 *   decision row kcm_sys.xa_decisions(gtrid, 'commit') and commits it with its own writes,
 *   in one local transaction that semi-sync replicates; then the branches are committed.
 *   The decision is durable before any shard commits, on the shard that survives a
 *   compute-node crash. No decision row means abort: kcm's in-doubt resolver finishes
 *   any branch left prepared by that rule, and aborts by inserting 'abort' first, so a
 *   coordinator's late INSERT fails on the key instead of committing.
 * - Abort: ROLLBACK / XA ROLLBACK on every shard; a connection that cannot be rolled back
 *   is closed, which rolls back its unprepared work on the shard. If the coordinator's
 *   COMMIT was sent the outcome is unknown here (or already commit): prepared branches are left
 *   (detached) for the resolver, and the client is told so.
 * - mysql_fdw closes a connection when the shard is unreachable or its foreign server
 *   changed (a failover re-points it): its close is routed through here, and a shard
 *   transaction that loses its connection fails the PostgreSQL transaction.
 *
 * XIDs: formatID 7037805 ("kcm"); gtrid "kcm:<coordinator shard id>:<random>.<time>";
 * bqual "<shard id>.<participant ordinal>.<shard session id>". The resolver reads the
 * coordinator from gtrid; the session id lets it end a branch whose compute node hangs with
 * its shard session open (MariaDB lets only that session end it until it disconnects).
 *
 * Test-only fault points behind the superuser-only setting kcm.transaction_fault.
 */
#include "postgres.h"

#include <signal.h>
#include <unistd.h>

#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "nodes/plannodes.h"
#include "parser/parsetree.h"
#include "postmaster/postmaster.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "shard_holds.h"
#include "shard_link.h"
#include "shard_transactions.h"

#define KCM_XA_FORMAT_ID 7037805
#define MAX_PARTICIPANTS 64
#define SERVER_PREFIX "shard_"

typedef struct Participant
{
	Oid			serverid;
	Oid			userid;			/* the user mapping's (InvalidOid for PUBLIC), as mysql_fdw keys it */
	MYSQL	   *conn;			/* NULL once closed */
	char		shard_id[NAMEDATALEN];
	char		bqual[NAMEDATALEN + 16];
	bool		xa;				/* an XA branch; the coordinator (the first) is a plain transaction */
	bool		wrote;			/* a write or a locking read ran on it and touched rows */
	bool		prepared;
	int			depth;			/* 1: shard transaction open; n > 1: savepoints s2..sn made */
	bool		lost;			/* its shard transaction is gone */
	char		lost_why[256];
} Participant;

static Participant participants[MAX_PARTICIPANTS];
static int	n_participants = 0;

/*
 * Writes not yet known to have touched a row: a statement's shards become writers when it
 * ends having processed rows. The INSERTs kcm's routing rules run for a partitioned parent
 * (one per partition, most of them inserting nothing) then make only the shards they
 * wrote on writers, and a one-row INSERT through a parent commits in one phase.
 */
typedef struct PendingWrite
{
	QueryDesc  *statement;
	uint64		shards;			/* bit i: participants[i] */
	int			level;			/* subtransaction level it ran at */
} PendingWrite;
static PendingWrite pending[MAX_PARTICIPANTS];
static int	n_pending = 0;
static ExecutorEnd_hook_type previous_end = NULL;
static char gtrid[65];
/* The coordinator's COMMIT was sent: from then on a prepared branch is never rolled back here, only left to the decision. */
static bool decision_sent = false;

enum transaction_fault
{
	FAULT_NONE,
	FAULT_CRASH_AFTER_PREPARE,
	FAULT_CRASH_AFTER_DECISION,
	FAULT_PAUSE_AFTER_PREPARE,
	FAULT_PAUSE_AFTER_DECISION,
};
static const struct config_enum_entry fault_options[] = {
	{"none", FAULT_NONE, false},
	{"crash_after_prepare", FAULT_CRASH_AFTER_PREPARE, false},
	{"crash_after_decision", FAULT_CRASH_AFTER_DECISION, false},
	{"pause_after_prepare", FAULT_PAUSE_AFTER_PREPARE, false},
	{"pause_after_decision", FAULT_PAUSE_AFTER_DECISION, false},
	{NULL, 0, false},
};
static int	transaction_fault = FAULT_NONE;

/* A connection closed (by mysql_fdw, or by detach): a shard transaction on it is gone. */
static void
on_connection_closed(MYSQL *conn)
{
	for (int i = 0; i < n_participants; i++)
	{
		Participant *p = &participants[i];

		if (p->conn != conn)
			continue;
		p->conn = NULL;
		if (!p->lost && p->depth > 0)
		{
			p->lost = true;
			snprintf(p->lost_why, sizeof(p->lost_why), "its connection to %s%s was closed (the shard was unreachable or its master changed)", SERVER_PREFIX, p->shard_id);
		}
	}
}

/* Closes the connection: the shard rolls back its unprepared work; a prepared branch stays for the resolver. */
static void
detach(Participant *p)
{
	if (p->conn != NULL)
		shard_link_release(p->conn);
	p->conn = NULL;
}

/*
 * Runs sql; on failure returns false with the shard's error in why, and *gone when the
 * connection was lost (it is closed then; a participant without one was lost before).
 */
static bool
try_run(Participant *p, const char *sql, char *why, size_t why_len, bool *gone)
{
	*gone = false;
	if (p->conn == NULL)
	{
		snprintf(why, why_len, "%s", p->lost ? p->lost_why : "no connection");
		return false;
	}
	return shard_link_query(p->conn, sql, why, why_len, gone);
}

static void
raise_failed(Participant *p, const char *sql, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_FDW_UNABLE_TO_CREATE_EXECUTION),
			 errmsg("kcm: \"%s\" on %s%s failed: %s", sql, SERVER_PREFIX, p->shard_id, why)));
}

/* A COMMIT sent and not answered: the client is told its transaction may or may not have committed (SQLSTATE 40003). */
static void
raise_outcome_unknown(Participant *p, const char *why, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN),
			 errmsg("kcm: the outcome of this transaction is unknown: its commit on %s%s was not answered: %s",
					SERVER_PREFIX, p->shard_id, why),
			 errdetail_internal("%s", detail)));
}

/*
 * A one-phase commit: a COMMIT whose connection is lost before the answer may have
 * committed on the shard or not, and the client is told so, as for the coordinator's commit
 * of a two-phase one; any other failure is an error as usual.
 */
static void
commit_one_phase(Participant *p, const char *sql)
{
	char		why[512];
	bool		gone;

	if (try_run(p, sql, why, sizeof(why), &gone))
		return;
	if (gone)
		raise_outcome_unknown(p, why, "It wrote on that shard only; the shard committed all of it or none.");
	raise_failed(p, sql, why);
}

static void
run(Participant *p, const char *sql)
{
	char		why[512];
	bool		gone;

	if (!try_run(p, sql, why, sizeof(why), &gone))
		raise_failed(p, sql, why);
}

/* Best effort, for abort paths, which must not raise: false when it did not happen. */
static bool
run_quietly(Participant *p, const char *sql)
{
	char		why[512];
	bool		gone;

	if (try_run(p, sql, why, sizeof(why), &gone))
		return true;
	elog(LOG, "kcm: \"%s\" on %s%s failed: %s", sql, SERVER_PREFIX, p->shard_id, why);
	return false;
}

static const char *
xid_of(Participant *p)
{
	static char xid[200];

	snprintf(xid, sizeof(xid), "'%s','%s',%d", gtrid, p->bqual, KCM_XA_FORMAT_ID);
	return xid;
}

static void
run_xa(Participant *p, const char *verb, const char *suffix)
{
	char		sql[256];

	snprintf(sql, sizeof(sql), "XA %s %s%s", verb, xid_of(p), suffix);
	run(p, sql);
}

static bool
run_xa_quietly(Participant *p, const char *verb)
{
	char		sql[256];

	snprintf(sql, sizeof(sql), "XA %s %s", verb, xid_of(p));
	return run_quietly(p, sql);
}

static const char *
isolation_sql(int level)
{
	switch (level)
	{
		case XACT_SERIALIZABLE:
			return "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE";
		case XACT_REPEATABLE_READ:
			return "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ";
		default:
			return "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";
	}
}

/* PostgreSQL's isolation level on the shard session (sent only when the session has another). */
static void
match_isolation(Participant *p)
{
	run(p, isolation_sql(XactIsoLevel == XACT_READ_UNCOMMITTED ? XACT_READ_COMMITTED : XactIsoLevel));
}

static void
make_gtrid(const char *coordinator_shard)
{
	uint64		nonce = 0;

	if (!pg_strong_random(&nonce, sizeof(nonce)))
		nonce = ((uint64) MyProcPid << 32) ^ (uint64) GetCurrentTimestamp();
	snprintf(gtrid, sizeof(gtrid), "kcm:%s:%016llx.%llx", coordinator_shard,
			 (unsigned long long) nonce, (unsigned long long) GetCurrentTimestamp());
}

/* Savepoints s2..s<level> on a shard whose transaction is shallower than PostgreSQL's. */
static void
deepen(Participant *p)
{
	int			level = GetCurrentTransactionNestLevel();
	char		sql[64];

	while (p->depth < level)
	{
		snprintf(sql, sizeof(sql), "SAVEPOINT s%d", p->depth + 1);
		run(p, sql);
		p->depth++;
	}
}

static void
begin_on_shard(Participant *p)
{
	match_isolation(p);
	if (n_participants == 1)
	{
		run(p, "START TRANSACTION");
		p->xa = false;
	}
	else
	{
		if (gtrid[0] == '\0')
			make_gtrid(participants[0].shard_id);
		/* The session id lets kcm end a branch whose compute node hangs with the session open. */
		snprintf(p->bqual, sizeof(p->bqual), "%s.%d.%lu", p->shard_id, n_participants - 1, shard_link_session_id(p->conn));
		p->xa = true;
		run_xa(p, "START", "");
	}
	p->depth = 1;
}

bool
shard_transactions_is_mysql_server(ForeignServer *server)
{
	static Oid	last_fdw = InvalidOid;
	static bool last_answer = false;
	ForeignDataWrapper *wrapper;
	char	   *handler;

	if (server->fdwid == last_fdw)
		return last_answer;
	wrapper = GetForeignDataWrapper(server->fdwid);
	handler = OidIsValid(wrapper->fdwhandler) ? get_func_name(wrapper->fdwhandler) : NULL;
	last_fdw = server->fdwid;
	last_answer = handler != NULL && strcmp(handler, "mysql_fdw_handler") == 0;
	return last_answer;
}

static Participant *
find_participant(Oid serverid, Oid userid)
{
	for (int i = 0; i < n_participants; i++)
		if (participants[i].serverid == serverid && participants[i].userid == userid)
			return &participants[i];
	return NULL;
}

/* The shard connection mysql_fdw will use for relid as userid, in this transaction from now on. */
static int
join(Oid relid, Oid userid)
{
	ForeignServer *server = GetForeignServer(GetForeignServerIdByRelId(relid));
	UserMapping *mapping;
	Participant *p;
	MYSQL	   *conn;

	if (!shard_transactions_is_mysql_server(server))
		return -1;
	shard_transactions_bind();
	mapping = GetUserMapping(userid, server->serverid);
	p = find_participant(server->serverid, mapping->userid);
	if (p != NULL && p->lost)
		ereport(ERROR,
				(errcode(ERRCODE_TRANSACTION_ROLLBACK),
				 errmsg("kcm: this transaction's part on %s is gone: %s", server->servername, p->lost_why),
				 errhint("ROLLBACK and run the transaction again.")));
	conn = shard_link_connection(relid, server, mapping);
	if (p == NULL)
	{
		if (n_participants == MAX_PARTICIPANTS)
			ereport(ERROR, (errmsg("kcm: a transaction may reach at most %d shard connections", MAX_PARTICIPANTS)));
		if (strncmp(server->servername, SERVER_PREFIX, strlen(SERVER_PREFIX)) != 0)
			ereport(ERROR, (errmsg("kcm: foreign server %s is not a kcm shard server (shard_<id>)", server->servername)));
		p = &participants[n_participants++];
		memset(p, 0, sizeof(*p));
		p->serverid = server->serverid;
		p->userid = mapping->userid;
		p->conn = conn;
		strlcpy(p->shard_id, server->servername + strlen(SERVER_PREFIX), sizeof(p->shard_id));
		begin_on_shard(p);
	}
	else if (p->conn != conn)
		ereport(ERROR,
				(errcode(ERRCODE_TRANSACTION_ROLLBACK),
				 errmsg("kcm: this transaction's connection to %s was replaced (its master changed)", server->servername),
				 errhint("ROLLBACK and run the transaction again.")));
	deepen(p);
	return p - participants;
}

static uint64
shard_bit(int participant)
{
	return participant < 0 ? 0 : ((uint64) 1) << participant;
}

static void
mark_writers(uint64 shards)
{
	for (int i = 0; i < n_participants; i++)
		if (shards & shard_bit(i))
			participants[i].wrote = true;
}

static bool watching_connections = false;

static bool
names_foreign_table(PlannedStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->rtable)
		if (lfirst_node(RangeTblEntry, lc)->rtekind == RTE_RELATION && lfirst_node(RangeTblEntry, lc)->relkind == RELKIND_FOREIGN_TABLE)
			return true;
	return false;
}

static bool
any_shard_transaction(void)
{
	return n_participants > 0;
}

/* INSERT ... VALUES of one row into one table: one statement on one shard, atomic on its own. */
static bool
single_row_insert(PlannedStmt *stmt)
{
	Plan	   *below;

	if (stmt->commandType != CMD_INSERT || stmt->hasModifyingCTE || list_length(stmt->resultRelations) != 1 ||
		stmt->planTree == NULL || !IsA(stmt->planTree, ModifyTable))
		return false;
	below = outerPlan(stmt->planTree);
	return below != NULL && IsA(below, Result) && outerPlan(below) == NULL;
}

void
shard_transactions_each_foreign_table(PlannedStmt *stmt, foreign_table_visitor visit, void *arg)
{
	bool		writes = stmt->commandType != CMD_SELECT || stmt->rowMarks != NIL || stmt->hasModifyingCTE;
	ListCell   *lc;

	foreach(lc, stmt->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);
		Oid			userid = rte->checkAsUser ? rte->checkAsUser : GetUserId();

		if (rte->rtekind != RTE_RELATION)
			continue;
		if (rte->relkind == RELKIND_FOREIGN_TABLE)
			visit(rte->relid, userid, arg);
		else if (rte->relkind == RELKIND_PARTITIONED_TABLE && writes)
		{
			/* Rows routed into partitions at run time reach shards the range table does not name. */
			ListCell   *child;

			foreach(child, find_all_inheritors(rte->relid, NoLock, NULL))
				if (get_rel_relkind(lfirst_oid(child)) == RELKIND_FOREIGN_TABLE)
					visit(lfirst_oid(child), userid, arg);
		}
	}
}

static void
join_visited(Oid relid, Oid userid, void *arg)
{
	*(uint64 *) arg |= shard_bit(join(relid, userid));
}

void
shard_transactions_join(QueryDesc *queryDesc, int eflags)
{
	PlannedStmt *stmt = queryDesc->plannedstmt;
	bool		writes = stmt->commandType != CMD_SELECT || stmt->rowMarks != NIL || stmt->hasModifyingCTE;
	uint64		shards = 0;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	if (!IsTransactionBlock() && !any_shard_transaction() && (!writes || single_row_insert(stmt)))
	{
		/* No transaction needed; an INSERT plans no scan, so mysql_fdw's connections are watched from here. */
		if (writes && !watching_connections && names_foreign_table(stmt))
			shard_transactions_bind();
		return;
	}
	shard_transactions_each_foreign_table(stmt, join_visited, &shards);
	if (!writes || shards == 0)
		return;
	if (stmt->hasModifyingCTE || n_pending == MAX_PARTICIPANTS)
	{
		/* Its own row count does not tell whether its CTEs wrote: a writer on every shard it reached. */
		mark_writers(shards);
		return;
	}
	pending[n_pending].statement = queryDesc;
	pending[n_pending].shards = shards;
	pending[n_pending].level = GetCurrentTransactionNestLevel();
	n_pending++;
}

/* A statement that ends having processed rows made its shards writers; one that touched none did not. */
static void
settle_pending_write(QueryDesc *queryDesc)
{
	for (int i = n_pending - 1; i >= 0; i--)
	{
		if (pending[i].statement != queryDesc)
			continue;
		if (queryDesc->estate == NULL || queryDesc->estate->es_processed > 0)
			mark_writers(pending[i].shards);
		pending[i] = pending[--n_pending];
		return;
	}
}

static void
end_statement(QueryDesc *queryDesc)
{
	if (n_pending > 0)
		settle_pending_write(queryDesc);
	if (previous_end)
		previous_end(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
}

static void
forget_transaction(void)
{
	n_participants = 0;
	n_pending = 0;
	gtrid[0] = '\0';
	decision_sent = false;
}

static void
fault_point(int at)
{
	if (transaction_fault != at)
		return;
	if (at == FAULT_PAUSE_AFTER_PREPARE || at == FAULT_PAUSE_AFTER_DECISION)
	{
		/* A gate: a test holds this advisory lock in another session to stop the commit here. */
		elog(LOG, "kcm: fault point %s reached for %s: waiting while advisory lock %d is held",
			 at == FAULT_PAUSE_AFTER_PREPARE ? "pause_after_prepare" : "pause_after_decision", gtrid, KCM_XA_FORMAT_ID);
		DirectFunctionCall1(pg_advisory_lock_int8, Int64GetDatum(KCM_XA_FORMAT_ID));
		DirectFunctionCall1(pg_advisory_unlock_int8, Int64GetDatum(KCM_XA_FORMAT_ID));
		return;
	}
	/* The whole compute node goes, as a SIGKILL of its postmaster would take it. */
	elog(LOG, "kcm: fault point %s reached for %s: killing the postmaster and this backend",
		 at == FAULT_CRASH_AFTER_PREPARE ? "crash_after_prepare" : "crash_after_decision", gtrid);
	kill(PostmasterPid, SIGKILL);
	raise(SIGKILL);
}

static void
refuse_lost(void)
{
	for (int i = 0; i < n_participants; i++)
		if (participants[i].lost)
			ereport(ERROR,
					(errcode(ERRCODE_TRANSACTION_ROLLBACK),
					 errmsg("kcm: the transaction is rolled back: its part on %s%s is gone: %s",
							SERVER_PREFIX, participants[i].shard_id, participants[i].lost_why)));
}

static void
commit_shards(void)
{
	Participant *coordinator = &participants[0];
	Participant *only_writer = NULL;
	int			writers = 0;
	char		sql[256];

	if (n_participants == 0)
		return;
	/* A statement not ended by now (a cursor left open) may have written: its shards are writers. */
	for (int i = 0; i < n_pending; i++)
		mark_writers(pending[i].shards);
	n_pending = 0;
	refuse_lost();
	/* Branches that only read end first; their reads are done. */
	for (int i = 1; i < n_participants; i++)
	{
		Participant *p = &participants[i];

		if (p->wrote)
			continue;
		run_xa(p, "END", "");
		run_xa(p, "ROLLBACK", "");
		p->depth = 0;
	}
	for (int i = 0; i < n_participants; i++)
		if (participants[i].wrote)
		{
			writers++;
			only_writer = &participants[i];
		}
	if (writers <= 1)
	{
		if (only_writer != NULL && only_writer->xa)
		{
			/* The coordinator only read: it ends first, so the writer's commit is the last word. */
			run(coordinator, "COMMIT");
			coordinator->depth = 0;
			run_xa(only_writer, "END", "");
			snprintf(sql, sizeof(sql), "XA COMMIT %s ONE PHASE", xid_of(only_writer));
			commit_one_phase(only_writer, sql);
			only_writer->depth = 0;
			return;
		}
		if (only_writer != NULL)
			commit_one_phase(coordinator, "COMMIT");
		else
			run(coordinator, "COMMIT");
		coordinator->depth = 0;
		return;
	}
	for (int i = 1; i < n_participants; i++)
	{
		Participant *p = &participants[i];

		if (!p->wrote)
			continue;
		run_xa(p, "END", "");
		run_xa(p, "PREPARE", "");
		p->prepared = true;
	}
	fault_point(FAULT_CRASH_AFTER_PREPARE);
	fault_point(FAULT_PAUSE_AFTER_PREPARE);
	snprintf(sql, sizeof(sql), "INSERT INTO kcm_sys.xa_decisions (gtrid, outcome) VALUES ('%s', 'commit')", gtrid);
	run(coordinator, sql);
	{
		char		why[512];
		bool		gone;

		decision_sent = true;
		if (!try_run(coordinator, "COMMIT", why, sizeof(why), &gone))
			raise_outcome_unknown(coordinator, why,
								  psprintf("Transaction %s is committed on every shard or on none; kcm decides which from %s%s within seconds.",
										   gtrid, SERVER_PREFIX, coordinator->shard_id));
	}
	coordinator->depth = 0;
	fault_point(FAULT_CRASH_AFTER_DECISION);
	fault_point(FAULT_PAUSE_AFTER_DECISION);
	for (int i = 1; i < n_participants; i++)
	{
		Participant *p = &participants[i];

		if (!p->prepared)
			continue;
		if (!run_xa_quietly(p, "COMMIT"))
		{
			ereport(WARNING,
					(errmsg("kcm: transaction %s is committed; its part on %s%s is prepared and kcm commits it within seconds",
							gtrid, SERVER_PREFIX, p->shard_id)));
			detach(p);
		}
		p->prepared = false;
		p->depth = 0;
	}
}

static void
abort_shards(void)
{
	for (int i = 0; i < n_participants; i++)
	{
		Participant *p = &participants[i];

		if (p->conn == NULL || (p->depth == 0 && !p->prepared))
			continue;
		if (decision_sent && p->prepared)
		{
			/* Its fate is the coordinator's decision (unknown here, or commit): the resolver finishes it. */
			detach(p);
			continue;
		}
		if (p->xa)
		{
			if (!p->prepared)
				(void) run_xa_quietly(p, "END");
			if (!run_xa_quietly(p, "ROLLBACK"))
				detach(p);
		}
		else if (!run_quietly(p, "ROLLBACK"))
			detach(p);
	}
}

static void
on_transaction_event(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			shard_holds_before_commit(n_participants > 0);
			commit_shards();
			forget_transaction();
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (n_participants > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("kcm: PREPARE TRANSACTION is not supported for a transaction that reached shards")));
			break;
		case XACT_EVENT_ABORT:
			abort_shards();
			forget_transaction();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PREPARE:
			forget_transaction();
			break;
		default:
			break;
	}
}

static void
on_subtransaction_event(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	char		sql[64];

	if (event != SUBXACT_EVENT_PRE_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	/* Statements that failed inside an aborted savepoint never end: their writes were rolled back. */
	if (event == SUBXACT_EVENT_ABORT_SUB)
		for (int i = n_pending - 1; i >= 0; i--)
			if (pending[i].level >= level)
				pending[i] = pending[--n_pending];
	snprintf(sql, sizeof(sql), "ROLLBACK TO SAVEPOINT s%d", level);
	for (int i = 0; i < n_participants; i++)
	{
		Participant *p = &participants[i];

		if (p->depth < level)
			continue;
		/* A released savepoint may stay on the shard: the next one of its level replaces it. */
		if (event == SUBXACT_EVENT_ABORT_SUB && !p->lost && !run_quietly(p, sql))
		{
			p->lost = true;
			snprintf(p->lost_why, sizeof(p->lost_why),
					 "the shard rolled back its whole transaction (a deadlock, or a lost connection) and ROLLBACK TO SAVEPOINT could not undo only part of it");
		}
		p->depth = level - 1;
	}
}

/*
 * A statement mysql_fdw sent was cut off by a lost connection. Inside a shard transaction the
 * shard rolled it back with the whole transaction; in autocommit the shard may have run it
 * or not, and the client is told so (SQLSTATE 40003), never that it failed.
 */
static void
on_statement_lost(MYSQL *conn, const char *why)
{
	int			shard = shard_link_shard_of(conn);
	char		name[32];
	bool		in_transaction = false;
	bool		ended = shard_holds_ended_by_switch();

	if (shard >= 0)
		snprintf(name, sizeof(name), "shard %d", shard);
	else
		snprintf(name, sizeof(name), "a shard");
	for (int i = 0; i < n_participants; i++)
		if (participants[i].conn == conn && participants[i].depth > 0)
			in_transaction = true;
	shard_link_release(conn);
	if (in_transaction)
		ereport(ERROR,
				(errcode(ERRCODE_TRANSACTION_ROLLBACK),
				 errmsg("kcm: %s: the connection to its master was lost while the statement ran; the transaction is rolled back%s",
						name, ended ? " (the shard switched its master while the transaction was open)" : ""),
				 errdetail_internal("%s", why),
				 errhint("ROLLBACK and run the transaction again.")));
	ereport(ERROR,
			(errcode(ERRCODE_T_R_STATEMENT_COMPLETION_UNKNOWN),
			 errmsg("kcm: %s: the connection to its master was lost while the statement ran; whether it committed is unknown", name),
			 errdetail_internal("%s", why),
			 errhint("Check whether its change is there before running it again.")));
}

void
shard_transactions_bind(void)
{
	shard_link_bind(on_connection_closed, on_statement_lost);
	watching_connections = true;
}

void
shard_transactions_init(void)
{
	DefineCustomEnumVariable("kcm.transaction_fault",
							 "Test-only fault point in a compute node's two-phase commit.",
							 "crash_after_prepare / crash_after_decision kill the compute node; pause_after_prepare / pause_after_decision wait while another session holds advisory lock 7037805. Only superusers may set it.",
							 &transaction_fault, FAULT_NONE, fault_options, PGC_SUSET, 0, NULL, NULL, NULL);
	previous_end = ExecutorEnd_hook;
	ExecutorEnd_hook = end_statement;
	RegisterXactCallback(on_transaction_event, NULL);
	RegisterSubXactCallback(on_subtransaction_event, NULL);
}
