/*
 * shard_holds: a compute node rides through a change of a shard's master (shard_holds.h;
 * docs/ride-through.md says what a client sees and why it was built this way).
 *
 * Shared state (kcm_ddl is in shared_preload_libraries): one slot per held shard (its id and
 * the hold's own deadline, so a manager that dies mid-switch never wedges this node) and,
 * per backend, the shards its current PostgreSQL transaction works on. One spinlock guards
 * both, so "is it held?" and "I work on it now" are one step: a hold's drain never misses a
 * statement that slipped in beside it.
 *
 * - A statement naming a held shard its transaction does not work on yet waits (a condition
 *   variable: a release wakes it at once; cancel and terminate work as in any wait) until the
 *   hold is released or its deadline passes, then accepts invalidation messages, so mysql_fdw
 *   sees the re-pointed foreign server and connects to the new master.
 * - kcm_shard_hold(shard, hold_ms, drain_ms) sets the hold, then waits up to drain_ms for every
 *   transaction working on that shard to end. A transaction block still open at the bound is marked ended:
 *   its next statement and its COMMIT fail with "rolled back because shard N switched master"
 *   (the manager closes the compute hosts' connections to the old master, which rolls back
 *   the shard side). A transaction already committing is never ended half-way, and a single
 *   statement in flight (autocommit) is not a transaction to end: both are left to finish.
 * - kcm_shard_release(shard) ends the hold and wakes the waiters.
 * - Before a statement, a cached connection whose socket is already at EOF (its master was
 *   killed) is closed instead of used; a connect refused by a dead master waits, bounded by
 *   kcm.shard_wait_ms or the shard's hold, for the shard's server to name a new master.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_inherits.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "optimizer/planner.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "shard_holds.h"
#include "shard_link.h"
#include "shard_transactions.h"

#define SERVER_PREFIX "shard_"
#define MAX_HOLDS 64
/* Shards one backend's transaction is tracked on; beyond that it counts as on every shard. */
#define MAX_TRACKED 16
#define MAX_STATEMENT_SHARDS 64
/* A hold longer than this is refused: the deadline is what keeps a dead manager harmless. */
#define MAX_HOLD_MS 120000

typedef struct HoldSlot
{
	int32		shard;
	TimestampTz until;			/* 0: free */
} HoldSlot;

typedef struct BackendShards
{
	int			pid;			/* 0: unused */
	int			n;
	bool		many;			/* more shards than tracked: on every shard */
	bool		in_block;		/* a transaction block: only such a transaction is ever ended by a drain */
	bool		committing;		/* past its last check before COMMIT: a drain waits for it */
	bool		ended;			/* a drain ended its transaction */
	int32		ended_shard;
	int32		shards[MAX_TRACKED];
} BackendShards;

typedef struct HoldState
{
	slock_t		mutex;
	ConditionVariable released;
	HoldSlot	holds[MAX_HOLDS];
	int			n_backends;
	BackendShards backends[FLEXIBLE_ARRAY_MEMBER];
} HoldState;

static HoldState *state = NULL;
static shmem_request_hook_type previous_request = NULL;
static shmem_startup_hook_type previous_startup = NULL;
static planner_hook_type previous_planner = NULL;
static bool exit_hook_set = false;
static int	shard_wait_ms = 10000;

static PlannedStmt *plan_after_holds(Query *parse, const char *query_string, int cursorOptions, ParamListInfo boundParams);

PG_FUNCTION_INFO_V1(kcm_shard_hold);
PG_FUNCTION_INFO_V1(kcm_shard_release);

static Size
state_size(void)
{
	return add_size(offsetof(HoldState, backends), mul_size(sizeof(BackendShards), MaxBackends));
}

static void
request_state(void)
{
	if (previous_request)
		previous_request();
	RequestAddinShmemSpace(state_size());
}

static void
start_state(void)
{
	bool		found;

	if (previous_startup)
		previous_startup();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	state = ShmemInitStruct("kcm shard holds", state_size(), &found);
	if (!found)
	{
		memset(state, 0, state_size());
		SpinLockInit(&state->mutex);
		ConditionVariableInit(&state->released);
		state->n_backends = MaxBackends;
	}
	LWLockRelease(AddinShmemInitLock);
}

void
shard_holds_init(void)
{
	DefineCustomIntVariable("kcm.shard_wait_ms",
							"How long a statement waits for a shard whose master is unreachable to get a new one.",
							"A statement that finds its shard's master gone (refused connection, closed socket) waits this long for the shard's foreign server to be re-pointed; a hold set by kcm bounds the wait by its own deadline instead.",
							&shard_wait_ms, 10000, 0, MAX_HOLD_MS, PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	previous_planner = planner_hook;
	planner_hook = plan_after_holds;
	if (!process_shared_preload_libraries_in_progress)
		return;
	previous_request = shmem_request_hook;
	shmem_request_hook = request_state;
	previous_startup = shmem_startup_hook;
	shmem_startup_hook = start_state;
}

/* -------- this backend's entry -------- */

static BackendShards *
my_entry(void)
{
	if (state == NULL || MyBackendId == InvalidBackendId || MyBackendId > state->n_backends)
		return NULL;
	return &state->backends[MyBackendId - 1];
}

static void
forget_mine(void)
{
	BackendShards *me = my_entry();

	if (me == NULL)
		return;
	SpinLockAcquire(&state->mutex);
	if (me->pid == MyProcPid)
	{
		me->n = 0;
		me->many = false;
		me->in_block = false;
		me->committing = false;
		me->ended = false;
	}
	SpinLockRelease(&state->mutex);
}

static void
clear_at_exit(int code, Datum arg)
{
	BackendShards *me = my_entry();

	if (me == NULL)
		return;
	SpinLockAcquire(&state->mutex);
	if (me->pid == MyProcPid)
		me->pid = 0;
	SpinLockRelease(&state->mutex);
}

static void
on_transaction_end(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE)
		forget_mine();
}

static bool
works_on(BackendShards *b, int32 shard)
{
	if (b->many)
		return true;
	for (int i = 0; i < b->n; i++)
		if (b->shards[i] == shard)
			return true;
	return false;
}

/* The hold on shard still in force at now, or NULL. Under the mutex. */
static HoldSlot *
hold_on(int32 shard, TimestampTz now)
{
	for (int i = 0; i < MAX_HOLDS; i++)
		if (state->holds[i].until > now && state->holds[i].shard == shard)
			return &state->holds[i];
	return NULL;
}

static TimestampTz
held_until(int32 shard)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz until = 0;
	HoldSlot   *h;

	SpinLockAcquire(&state->mutex);
	h = hold_on(shard, now);
	if (h != NULL)
		until = h->until;
	SpinLockRelease(&state->mutex);
	return until;
}

/* Waits while shard is held; true when it waited at all. */
static bool
wait_while_held(int32 shard)
{
	bool		waited = false;

	for (;;)
	{
		TimestampTz until = held_until(shard);
		long		ms;

		if (until == 0)
			break;
		ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);
		if (ms <= 0)
			break;
		waited = true;
		(void) ConditionVariableTimedSleep(&state->released, Min(ms, 1000), PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
	return waited;
}

/* -------- which shards a statement names -------- */

/* The kcm shard id of a foreign server shard_<id> of mysql_fdw, or -1. */
static int32
shard_of_server(ForeignServer *server)
{
	const char *name = server->servername;
	char	   *end;
	long		id;

	if (strncmp(name, SERVER_PREFIX, strlen(SERVER_PREFIX)) != 0)
		return -1;
	id = strtol(name + strlen(SERVER_PREFIX), &end, 10);
	if (*end != '\0' || end == name + strlen(SERVER_PREFIX) || id < 0 || id > PG_INT32_MAX)
		return -1;
	return (int32) id;
}

typedef struct StatementShard
{
	int32		shard;
	Oid			relid;
	Oid			userid;
	ForeignServer *server;
} StatementShard;

static int
add_relation(StatementShard *out, int n, Oid relid, Oid userid)
{
	ForeignServer *server = GetForeignServer(GetForeignServerIdByRelId(relid));
	int32		shard = shard_of_server(server);

	if (shard < 0 || n == MAX_STATEMENT_SHARDS || !shard_transactions_is_mysql_server(server))
		return n;
	for (int i = 0; i < n; i++)
		if (out[i].server->serverid == server->serverid && out[i].userid == userid)
			return n;
	out[n].shard = shard;
	out[n].relid = relid;
	out[n].userid = userid;
	out[n].server = server;
	return n + 1;
}

typedef struct QueryShards
{
	StatementShard *out;
	int			n;
} QueryShards;

static void
add_visited(Oid relid, Oid userid, void *arg)
{
	QueryShards *q = (QueryShards *) arg;

	q->n = add_relation(q->out, q->n, relid, userid);
}

/* The foreign tables a planned statement reaches (those its shard transaction joins). */
static int
statement_shards(PlannedStmt *stmt, StatementShard *out)
{
	QueryShards q = {out, 0};

	shard_transactions_each_foreign_table(stmt, add_visited, &q);
	return q.n;
}

/* Every foreign table a query names, in subqueries, CTEs and sublinks too (before planning expands partitions). */
static bool
collect_query_shards(Node *node, QueryShards *q)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, collect_query_shards, q, QTW_EXAMINE_RTES_BEFORE);
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;
		Oid			userid = rte->checkAsUser ? rte->checkAsUser : GetUserId();

		if (rte->rtekind != RTE_RELATION)
			return false;
		if (rte->relkind == RELKIND_FOREIGN_TABLE)
			q->n = add_relation(q->out, q->n, rte->relid, userid);
		else if (rte->relkind == RELKIND_PARTITIONED_TABLE)
		{
			ListCell   *child;

			foreach(child, find_all_inheritors(rte->relid, NoLock, NULL))
				if (get_rel_relkind(lfirst_oid(child)) == RELKIND_FOREIGN_TABLE)
					q->n = add_relation(q->out, q->n, lfirst_oid(child), userid);
		}
		return false;
	}
	return expression_tree_walker(node, collect_query_shards, q);
}

/* -------- before a statement -------- */

static void
raise_ended(int32 shard)
{
	ereport(ERROR,
			(errcode(ERRCODE_TRANSACTION_ROLLBACK),
			 errmsg("kcm: the transaction is rolled back: shard %d switched its master while the transaction was open on it", shard),
			 errdetail("A planned switch gives open transactions a short drain; this one was still open when it ended."),
			 errhint("ROLLBACK and run the transaction again; it runs on the new master.")));
}

/*
 * Marks the statement's shards as worked on by this transaction, unless one is held and
 * this transaction does not work on it yet: then that shard, and nothing is marked.
 */
static int32
enter_or_find_hold(BackendShards *me, StatementShard *shards, int n, bool *ended, int32 *ended_shard)
{
	TimestampTz now = GetCurrentTimestamp();
	int32		blocked = -1;

	SpinLockAcquire(&state->mutex);
	if (me->pid != MyProcPid)
	{
		memset(me, 0, sizeof(*me));
		me->pid = MyProcPid;
	}
	*ended = me->ended;
	*ended_shard = me->ended_shard;
	me->in_block |= IsTransactionBlock();
	for (int i = 0; i < n && !*ended && blocked < 0; i++)
		if (!works_on(me, shards[i].shard) && hold_on(shards[i].shard, now) != NULL)
			blocked = shards[i].shard;
	if (!*ended && blocked < 0 && !me->many)
		for (int i = 0; i < n; i++)
		{
			if (works_on(me, shards[i].shard))
				continue;
			if (me->n == MAX_TRACKED)
			{
				me->many = true;
				break;
			}
			me->shards[me->n++] = shards[i].shard;
		}
	SpinLockRelease(&state->mutex);
	return blocked;
}

/* A cached connection whose master is gone is closed, and made again (which may wait for a new master). */
static void
replace_dead_connections(StatementShard *shards, int n)
{
	for (int i = 0; i < n; i++)
	{
		UserMapping *mapping = GetUserMapping(shards[i].userid, shards[i].server->serverid);
		MYSQL	   *conn = shard_link_connection(shards[i].relid, shards[i].server, mapping);

		shard_link_note_shard(conn, shards[i].shard);
		if (shard_link_alive(conn))
			continue;
		elog(LOG, "kcm: the connection to shard %d's master is closed at its end; connecting again", shards[i].shard);
		shard_link_release(conn);
		conn = shard_link_connection(shards[i].relid, shards[i].server, mapping);
		shard_link_note_shard(conn, shards[i].shard);
	}
}

/* The hold wait and the dead-connection check, for the shards a statement (or a plan about to be made) reaches. */
static void
enter_shards(StatementShard *shards, int n)
{
	BackendShards *me = my_entry();
	bool		waited = false;

	if (n == 0)
		return;
	shard_transactions_bind();
	if (me != NULL)
	{
		if (!exit_hook_set)
		{
			before_shmem_exit(clear_at_exit, (Datum) 0);
			RegisterXactCallback(on_transaction_end, NULL);
			exit_hook_set = true;
		}
		for (;;)
		{
			bool		ended;
			int32		ended_shard;
			int32		blocked = enter_or_find_hold(me, shards, n, &ended, &ended_shard);

			if (ended)
				raise_ended(ended_shard);
			if (blocked < 0)
				break;
			waited |= wait_while_held(blocked);
		}
	}
	if (waited)
	{
		/* The hold ended: the shard's server was re-pointed meanwhile (or the deadline came). */
		AcceptInvalidationMessages();
		for (int i = 0; i < n; i++)
			shards[i].server = GetForeignServer(shards[i].server->serverid);
	}
	replace_dead_connections(shards, n);
}

void
shard_holds_enter(QueryDesc *queryDesc, int eflags)
{
	StatementShard shards[MAX_STATEMENT_SHARDS];

	if ((eflags & EXEC_FLAG_EXPLAIN_ONLY) || queryDesc->plannedstmt->commandType == CMD_UTILITY)
		return;
	enter_shards(shards, statement_shards(queryDesc->plannedstmt, shards));
}

/*
 * mysql_fdw talks to the shard while planning, too (a write's plan sends EXPLAIN to check
 * the table's first column; a scan's sends SET sql_mode): the same wait and check come
 * before the plan is made.
 */
static PlannedStmt *
plan_after_holds(Query *parse, const char *query_string, int cursorOptions, ParamListInfo boundParams)
{
	if (parse->commandType != CMD_UTILITY)
	{
		StatementShard shards[MAX_STATEMENT_SHARDS];
		QueryShards q = {shards, 0};

		(void) collect_query_shards((Node *) parse, &q);
		enter_shards(shards, q.n);
	}
	if (previous_planner)
		return previous_planner(parse, query_string, cursorOptions, boundParams);
	return standard_planner(parse, query_string, cursorOptions, boundParams);
}

void
shard_holds_before_commit(bool has_shard_transaction)
{
	BackendShards *me = my_entry();
	bool		ended = false;
	int32		ended_shard = 0;

	if (me == NULL)
		return;
	SpinLockAcquire(&state->mutex);
	if (me->pid == MyProcPid)
	{
		ended = me->ended && has_shard_transaction;
		ended_shard = me->ended_shard;
		me->committing = !ended;
	}
	SpinLockRelease(&state->mutex);
	if (ended)
		raise_ended(ended_shard);
}

bool
shard_holds_ended_by_switch(void)
{
	BackendShards *me = my_entry();
	bool		ended = false;

	if (me == NULL)
		return false;
	SpinLockAcquire(&state->mutex);
	ended = me->pid == MyProcPid && me->ended;
	SpinLockRelease(&state->mutex);
	return ended;
}

/* -------- a connect refused by a dead master -------- */

/* The shard server (oid) whose options name host:port, or InvalidOid. */
static Oid
server_at(const char *host, unsigned int port, int32 *shard)
{
	Relation	rel = table_open(ForeignServerRelationId, AccessShareLock);
	SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	HeapTuple	tuple;
	Oid			found = InvalidOid;

	while (found == InvalidOid && (tuple = systable_getnext(scan)) != NULL)
	{
		Form_pg_foreign_server form = (Form_pg_foreign_server) GETSTRUCT(tuple);
		ForeignServer *server;
		const char *h = NULL;
		unsigned int p = 3306;
		ListCell   *lc;

		if (strncmp(NameStr(form->srvname), SERVER_PREFIX, strlen(SERVER_PREFIX)) != 0)
			continue;
		server = GetForeignServer(form->oid);
		foreach(lc, server->options)
		{
			DefElem    *opt = lfirst_node(DefElem, lc);

			if (strcmp(opt->defname, "host") == 0)
				h = defGetString(opt);
			else if (strcmp(opt->defname, "port") == 0)
				p = (unsigned int) atoi(defGetString(opt));
		}
		if (h != NULL && strcmp(h, host) == 0 && p == port && shard_of_server(server) >= 0)
		{
			found = form->oid;
			*shard = shard_of_server(server);
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

static void
server_address(Oid serverid, char *host, size_t host_len, unsigned int *port)
{
	ForeignServer *server = GetForeignServer(serverid);
	ListCell   *lc;

	host[0] = '\0';
	*port = 3306;
	foreach(lc, server->options)
	{
		DefElem    *opt = lfirst_node(DefElem, lc);

		if (strcmp(opt->defname, "host") == 0)
			strlcpy(host, defGetString(opt), host_len);
		else if (strcmp(opt->defname, "port") == 0)
			*port = (unsigned int) atoi(defGetString(opt));
	}
}

MYSQL *
shard_holds_follow_master(MYSQL *conn, const char *host, unsigned int port, const char *user,
						  const char *passwd, const char *db, const char *unix_socket, unsigned long flags)
{
	int32		shard = -1;
	Oid			serverid;
	TimestampTz deadline;
	char		at_host[256];
	unsigned int at_port = port;

	if (state == NULL || !IsTransactionState() || host == NULL)
		return NULL;
	serverid = server_at(host, port, &shard);
	if (!OidIsValid(serverid))
		return NULL;
	strlcpy(at_host, host, sizeof(at_host));
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), shard_wait_ms);
	elog(LOG, "kcm: shard %d's master at %s:%u refuses connections; waiting up to %d ms for a new one", shard, host, port, shard_wait_ms);
	for (;;)
	{
		char		next_host[256];
		unsigned int next_port;
		bool		held = wait_while_held(shard);

		if (!held)
		{
			if (GetCurrentTimestamp() >= deadline)
				break;
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 50, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		AcceptInvalidationMessages();
		server_address(serverid, next_host, sizeof(next_host), &next_port);
		if (strcmp(next_host, at_host) == 0 && next_port == at_port)
			continue;
		/* Re-pointed: the new master (its failure, too, is waited through while time is left). */
		strlcpy(at_host, next_host, sizeof(at_host));
		at_port = next_port;
		if (shard_link_connect(conn, at_host, user, passwd, db, at_port, unix_socket, flags) != NULL)
		{
			elog(LOG, "kcm: shard %d's master is at %s:%u now; connected", shard, at_host, at_port);
			shard_link_note_shard(conn, shard);
			return conn;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_FDW_UNABLE_TO_ESTABLISH_CONNECTION),
			 errmsg("kcm: shard %d: its master at %s:%u cannot be reached, and no new master was named within %d ms", shard, at_host, at_port, shard_wait_ms),
			 errdetail("Nothing was sent to the shard."),
			 errhint("kcm replaces a failed master within seconds; run the statement again. kcm.shard_wait_ms sets how long a statement waits.")));
	return NULL;
}

/* -------- the manager's hold, through the agent's admin session -------- */

static void
require_state(void)
{
	if (!superuser())
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE), errmsg("kcm: only a superuser (the kcm agent) holds shards")));
	if (state == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("kcm: shard holds need kcm_ddl in shared_preload_libraries (and a restart after it was added)")));
}

typedef struct Busy
{
	int			blocks;			/* transaction blocks working on the shard, not committing */
	int			committing;		/* transactions committing */
	int			statements;		/* single statements (autocommit) in flight on it */
} Busy;

/* What is under way on shard in backends other than this one, not ended. Under the mutex. */
static Busy
busy_on(int32 shard)
{
	Busy		busy = {0, 0, 0};

	for (int i = 0; i < state->n_backends; i++)
	{
		BackendShards *b = &state->backends[i];

		if (b->pid == 0 || b->pid == MyProcPid || b->ended || !works_on(b, shard))
			continue;
		if (b->committing)
			busy.committing++;
		else if (b->in_block)
			busy.blocks++;
		else
			busy.statements++;
	}
	return busy;
}

/* Ends (marks) every transaction block on shard not committing; returns how many. Under the mutex. */
static int
end_open_transactions(int32 shard)
{
	int			ended = 0;

	for (int i = 0; i < state->n_backends; i++)
	{
		BackendShards *b = &state->backends[i];

		if (b->pid == 0 || b->pid == MyProcPid || b->ended || b->committing || !b->in_block || !works_on(b, shard))
			continue;
		b->ended = true;
		b->ended_shard = shard;
		ended++;
	}
	return ended;
}

/*
 * kcm_shard_hold(shard int, hold_ms int, drain_ms int) RETURNS text (JSON):
 * {"open_at_start": n, "drain_ms": ms, "ended": n}. Holding a held shard moves its deadline.
 */
Datum
kcm_shard_hold(PG_FUNCTION_ARGS)
{
	int32		shard = PG_GETARG_INT32(0);
	int32		hold_ms = PG_GETARG_INT32(1);
	int32		drain_ms = PG_GETARG_INT32(2);
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz until = TimestampTzPlusMilliseconds(start, hold_ms);
	TimestampTz drain_until = TimestampTzPlusMilliseconds(start, Min(drain_ms, hold_ms));
	HoldSlot   *slot = NULL;
	int			open_at_start = -1;
	int			ended = 0;

	require_state();
	if (shard < 0 || hold_ms <= 0 || hold_ms > MAX_HOLD_MS || drain_ms < 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("kcm: shard %d, hold_ms %d, drain_ms %d: want shard >= 0, 0 < hold_ms <= %d, drain_ms >= 0", shard, hold_ms, drain_ms, MAX_HOLD_MS)));
	SpinLockAcquire(&state->mutex);
	slot = hold_on(shard, start);
	for (int i = 0; slot == NULL && i < MAX_HOLDS; i++)
		if (state->holds[i].until <= start)
			slot = &state->holds[i];
	if (slot != NULL)
	{
		slot->shard = shard;
		slot->until = until;
	}
	SpinLockRelease(&state->mutex);
	if (slot == NULL)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED), errmsg("kcm: more than %d shards held at once", MAX_HOLDS)));
	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		Busy		busy;

		SpinLockAcquire(&state->mutex);
		busy = busy_on(shard);
		if (busy.blocks > 0 && now >= drain_until)
		{
			ended += end_open_transactions(shard);
			busy.blocks = 0;
		}
		SpinLockRelease(&state->mutex);
		if (open_at_start < 0)
			open_at_start = busy.blocks + busy.committing + busy.statements;
		/*
		 * Past the bound, what is left is not waited for: a commit under way is never ended
		 * half-way (it completes on the old master before its writes stop, or the read-only
		 * master refuses it and its client is told), and a single statement in flight is no
		 * transaction that could be ended: it commits where it runs, or its connection is lost.
		 */
		if (busy.blocks + busy.committing + busy.statements == 0 || now >= drain_until)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 5, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("{\"open_at_start\": %d, \"drain_ms\": %ld, \"ended\": %d}", open_at_start,
											  TimestampDifferenceMilliseconds(start, GetCurrentTimestamp()), ended)));
}

/* kcm_shard_release(shard int) RETURNS bool: true when a hold was in force. */
Datum
kcm_shard_release(PG_FUNCTION_ARGS)
{
	int32		shard = PG_GETARG_INT32(0);
	TimestampTz now = GetCurrentTimestamp();
	HoldSlot   *slot;

	require_state();
	SpinLockAcquire(&state->mutex);
	slot = hold_on(shard, now);
	if (slot != NULL)
		slot->until = 0;
	SpinLockRelease(&state->mutex);
	ConditionVariableBroadcast(&state->released);
	PG_RETURN_BOOL(slot != NULL);
}
