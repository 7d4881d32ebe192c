/*
 * kcm_ddl: what the event triggers of kcm_ddl--1.0.sql cannot do, decided before
 * PostgreSQL runs a utility statement. Loaded through shared_preload_libraries.
 *
 * 1. Tables made through a compute node are foreign tables (their rows live on a shard),
 *    and PostgreSQL refuses `DROP TABLE` on a foreign table before any event trigger runs.
 *    A user writes `DROP TABLE t`, as the reference system's own checks do, so a DROP
 *    TABLE whose every existing target is a foreign table becomes DROP FOREIGN TABLE; the
 *    sql_drop trigger then removes the table from its shard in the same statement.
 * 2. A shard commits DDL at once and cannot roll it back. DDL that reaches a shard (CREATE
 *    TABLE, DROP or ALTER of a foreign table, DROP SCHEMA) therefore runs in its own
 *    transaction, as CREATE DATABASE does: inside BEGIN ... ROLLBACK the shard would keep
 *    what the compute node forgot. The agent's catalog sync (kcm.sync = on, a superuser-only
 *    setting defined here) is exempt: its changes are local only.
 * 3. CREATE TABLE AS / SELECT INTO would fill a local table that is then replaced by an
 *    empty foreign one: refused, with the two statements that do it.
 * 4. ALTER COLUMN TYPE and SET/DROP DEFAULT: which columns, for the trigger (note_column_changes);
 *    ATTACH and DETACH PARTITION: which tables (note_partition_commands).
 * 5. Row counts of writes through a partitioned parent (route_rows in sql/20-partitions.sql):
 *    its INSTEAD rules write to each partition in a separate action, and only the last
 *    action sets the command tag; count_routed_rows adds the rows of the earlier ones.
 * 6. UPDATE and DELETE through a partitioned parent: PostgreSQL tells the rows of its
 *    partitions apart by tableoid, which it adds to each partition's scan and fills in
 *    itself; mysql_fdw 2.8 refuses any system column in a scan ("system attribute tableoid
 *    can't be fetched from remote relation"). Its GetForeignPlan is wrapped to not see that
 *    column (hide_tableoid_from_mysql_fdw), so the writes go to the partitions as in
 *    PostgreSQL. An UPDATE of the partition key is refused: PostgreSQL would move the row
 *    by deleting it and then inserting it through tuple routing, which mysql_fdw refuses
 *    after the delete has reached the shard. And mysql_fdw 2.8's DELETE takes the row to
 *    delete from the first column its plan returns, which through a parent is tableoid:
 *    delete_by_row_identity hands it the row identity column (the partition's first) instead.
 * 7. CREATE DATABASE / DROP DATABASE fire no event trigger: kcm_ddl.shard_databases is run
 *    around them here (database_on_shards), so that every compute node follows. The new
 *    database gets this one's shard servers before the statement returns (new_database.c),
 *    so that CREATE TABLE in it works at once.
 * 8. PostgreSQL has no indexes on foreign tables: CREATE INDEX on one, and DROP INDEX of a
 *    name this node does not have, are handed to kcm_ddl.create_index / drop_index, which
 *    carry them out on the table's shard, instead of running here.
 * 9. A compute node never makes a user table of its own. What carries CREATE TABLE to a
 *    shard is the extension's event trigger, which lives in each database; where it is
 *    missing or disabled (the extension dropped), DDL that would reach a shard is refused
 *    here instead of leaving PostgreSQL to make a plain local table whose rows reach no
 *    shard (issue 35, defect 9: the catalog sync had dropped schema public, and with it
 *    mysql_fdw and kcm_ddl, after delete_shards).
 * 10. An INSERT through a partitioned parent is rewritten into one query per partition, each
 *    evaluating the rows anew: one whose partition key or row source is volatile is refused
 *    after parse analysis, before anything is written (routed_inserts.c).
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_event_trigger.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "utils/syscache.h"
#include "catalog/pg_inherits.h"
#include "commands/dbcommands.h"
#include "storage/procarray.h"
#include "utils/acl.h"
#include "miscadmin.h"
#include "catalog/pg_class.h"
#include "nodes/parsenodes.h"
#include "access/xact.h"
#include "access/table.h"
#include "executor/executor.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "optimizer/plancat.h"
#include "utils/partcache.h"
#include "utils/rel.h"
#include "executor/spi.h"
#include "parser/analyze.h"
#include "parser/parsetree.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "tcop/utility.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "new_database.h"
#include "routed_inserts.h"
#include "shard_holds.h"
#include "shard_transactions.h"

PG_MODULE_MAGIC;

void _PG_init(void);

static ProcessUtility_hook_type previous_hook = NULL;
static ExecutorStart_hook_type previous_start = NULL;
static ExecutorRun_hook_type previous_run = NULL;

static post_parse_analyze_hook_type previous_post_parse_analyze = NULL;
static get_relation_info_hook_type previous_relation_info = NULL;
static GetForeignPlan_function mysql_get_foreign_plan = NULL;
static ExecForeignDelete_function mysql_exec_foreign_delete = NULL;
/* Where the DELETE being run has its row identity column (named delete_rowid_name) in its plan's output. */
static char delete_rowid_name[NAMEDATALEN];
static AttrNumber delete_rowid_attno = 0;

/* Rows written by rule actions that do not set the command tag, not yet counted in one that does. */
static uint64 routed_rows = 0;

/* True when at least one target exists and every existing target is a foreign table. */
static bool
targets_are_foreign_tables(DropStmt *stmt)
{
	ListCell   *cell;
	int			foreign = 0;

	foreach(cell, stmt->objects)
	{
		RangeVar   *rel = makeRangeVarFromNameList((List *) lfirst(cell));
		Oid			relid = RangeVarGetRelid(rel, NoLock, true);

		if (!OidIsValid(relid))
			continue;
		if (get_rel_relkind(relid) != RELKIND_FOREIGN_TABLE)
			return false;
		foreign++;
	}
	return foreign > 0;
}

/* A foreign table, or a partitioned table with a foreign partition: ALTER TABLE on it reaches a shard. */
static bool
names_shard_table(RangeVar *rel)
{
	Oid			relid = RangeVarGetRelid(rel, NoLock, true);
	ListCell   *cell;

	if (!OidIsValid(relid))
		return false;
	if (get_rel_relkind(relid) == RELKIND_FOREIGN_TABLE)
		return true;
	if (get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		return false;
	foreach(cell, find_all_inheritors(relid, NoLock, NULL))
		if (get_rel_relkind(lfirst_oid(cell)) == RELKIND_FOREIGN_TABLE)
			return true;
	return false;
}

/* True when the statement attaches or detaches a partition. */
static bool
changes_partitions(AlterTableStmt *stmt)
{
	ListCell   *cell;

	foreach(cell, stmt->cmds)
		if (((AlterTableCmd *) lfirst(cell))->subtype == AT_AttachPartition ||
			((AlterTableCmd *) lfirst(cell))->subtype == AT_DetachPartition)
			return true;
	return false;
}

/*
 * kcm.sync: on while kcm's own sessions (the agent's catalog sync, a move's re-point) change
 * this node's catalog to follow the shards; the hooks and carry_out leave that DDL alone.
 * Superuser-only (PGC_SUSET): as a placeholder any compute user could set it and then run
 * DDL that stays on this node, so that compute nodes disagree with each other and the shards.
 */
static bool catalog_sync = false;

static bool
in_catalog_sync(void)
{
	return catalog_sync;
}

/* True when this database has the event trigger `name` (sql/40-triggers.sql), enabled. */
static bool
event_trigger_enabled(const char *name)
{
	HeapTuple	tuple = SearchSysCache1(EVENTTRIGGERNAME, CStringGetDatum(name));
	bool		enabled;

	if (!HeapTupleIsValid(tuple))
		return false;
	enabled = ((Form_pg_event_trigger) GETSTRUCT(tuple))->evtenabled != TRIGGER_DISABLED;
	ReleaseSysCache(tuple);
	return enabled;
}

/* Refuses `tag` when the event trigger that carries it to the shards is not here to (item 9). */
static void
require_ddl_reaches_shards(const char *tag)
{
	const char *trigger = strncmp(tag, "DROP", 4) == 0 ? "kcm_ddl_sql_drop" : "kcm_ddl_command_end";

	if (creating_extension || event_trigger_enabled(trigger))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("kcm: %s is not carried to a shard in database %s: kcm_ddl's event trigger %s is missing or disabled here; nothing was changed",
					tag, get_database_name(MyDatabaseId), trigger),
			 errdetail("A compute node keeps no table of its own: rows written to it would reach no shard."),
			 errhint("A superuser puts it back with CREATE EXTENSION kcm_ddl CASCADE (or ALTER EVENT TRIGGER %s ENABLE) in this database.", trigger)));
}

/* The command tag when this statement reaches a shard, NULL when it stays on this node. */
static const char *
reaches_shard(Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
		case T_CreateSchemaStmt:
			return "CREATE SCHEMA";
		case T_CreateStmt:
			return ((CreateStmt *) parsetree)->relation->relpersistence == RELPERSISTENCE_TEMP ? NULL : "CREATE TABLE";
		case T_DropStmt:
			{
				DropStmt   *drop = (DropStmt *) parsetree;

				if (drop->removeType == OBJECT_SCHEMA)
					return "DROP SCHEMA";
				if (drop->removeType == OBJECT_FOREIGN_TABLE ||
					(drop->removeType == OBJECT_TABLE && targets_are_foreign_tables(drop)))
					return "DROP TABLE";
				return NULL;
			}
		case T_AlterTableStmt:
			return names_shard_table(((AlterTableStmt *) parsetree)->relation) ||
				changes_partitions((AlterTableStmt *) parsetree) ? "ALTER TABLE" : NULL;
		case T_RenameStmt:
			{
				RenameStmt *rename = (RenameStmt *) parsetree;

				return rename->relation != NULL && names_shard_table(rename->relation) ? "ALTER TABLE" : NULL;
			}
		default:
			return NULL;
	}
}

/* Appends the names of the columns `stmt` changes with subcommand `subtype` to `names` as a JSON array. */
static void
column_names_json(AlterTableStmt *stmt, AlterTableType subtype, StringInfo names)
{
	ListCell   *cell;
	bool		first = true;

	appendStringInfoChar(names, '[');
	foreach(cell, stmt->cmds)
	{
		AlterTableCmd *cmd = (AlterTableCmd *) lfirst(cell);

		if (cmd->subtype != subtype || cmd->name == NULL)
			continue;
		if (!first)
			appendStringInfoChar(names, ',');
		escape_json(names, cmd->name);
		first = false;
	}
	appendStringInfoChar(names, ']');
}

/*
 * ALTER TABLE ... ALTER COLUMN ... TYPE and ... SET/DROP DEFAULT on a foreign table change
 * only its local definition, and the event trigger cannot see which columns a statement
 * changed (its pg_ddl_command is opaque to SQL). They are handed over in kcm.retyped and
 * kcm.defaulted, JSON arrays of column names set for every ALTER of a foreign table (empty
 * when none), which carry_out reads to MODIFY those columns, or set their defaults, on the shard.
 */
static void
note_column_changes(AlterTableStmt *stmt)
{
	StringInfoData names;

	initStringInfo(&names);
	column_names_json(stmt, AT_AlterColumnType, &names);
	SetConfigOption("kcm.retyped", names.data, PGC_USERSET, PGC_S_SESSION);
	resetStringInfo(&names);
	column_names_json(stmt, AT_ColumnDefault, &names);
	SetConfigOption("kcm.defaulted", names.data, PGC_USERSET, PGC_S_SESSION);
}

/*
 * ATTACH PARTITION and DETACH PARTITION: the shard table of the partition records its parent
 * in its COMMENT (the catalog sync of the other compute nodes attaches it from there), so
 * carry_out is told which tables the statement attached or detached, in kcm.partitions: a
 * JSON array of [verb, schema, table], set for every ALTER TABLE (empty when none).
 * DETACH ... CONCURRENTLY runs in transactions of its own, where no trigger sees it whole:
 * refused.
 */
static void
note_partition_commands(AlterTableStmt *stmt)
{
	StringInfoData noted;
	ListCell   *cell;
	bool		first = true;

	initStringInfo(&noted);
	appendStringInfoChar(&noted, '[');
	foreach(cell, stmt->cmds)
	{
		AlterTableCmd *cmd = (AlterTableCmd *) lfirst(cell);
		PartitionCmd *partition;
		Oid			relid;

		if (cmd->subtype != AT_AttachPartition && cmd->subtype != AT_DetachPartition)
			continue;
		partition = (PartitionCmd *) cmd->def;
		if (cmd->subtype == AT_DetachPartition && partition->concurrent)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("kcm: DETACH PARTITION CONCURRENTLY is not carried to the shards; nothing was changed"),
					 errhint("DETACH PARTITION without CONCURRENTLY.")));
		relid = RangeVarGetRelid(partition->name, NoLock, true);
		if (!OidIsValid(relid))
			continue;			/* PostgreSQL reports it */
		if (!first)
			appendStringInfoChar(&noted, ',');
		appendStringInfo(&noted, "[\"%s\",", cmd->subtype == AT_AttachPartition ? "attach" : "detach");
		escape_json(&noted, get_namespace_name(get_rel_namespace(relid)));
		appendStringInfoChar(&noted, ',');
		escape_json(&noted, get_rel_name(relid));
		appendStringInfoChar(&noted, ']');
		first = false;
	}
	appendStringInfoChar(&noted, ']');
	SetConfigOption("kcm.partitions", noted.data, PGC_USERSET, PGC_S_SESSION);
}

/*
 * ALTER TABLE on a partitioned parent kcm routes: its routing rule names the columns, and
 * PostgreSQL refuses to retype or drop a column a rule uses. The rule is dropped here, in
 * the statement's transaction, and carry_out rebuilds it for the columns the parent has
 * afterwards (a failed statement brings the old one back with its rollback).
 */
static void
unroute_parent(RangeVar *rel)
{
	Oid			relid = RangeVarGetRelid(rel, NoLock, true);
	StringInfoData sql;

	if (!OidIsValid(relid) || get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		return;
	initStringInfo(&sql);
	appendStringInfo(&sql, "DROP RULE IF EXISTS kcm_route_insert ON %s",
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid)));
	SPI_connect();
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "kcm: %s failed", sql.data);
	SPI_finish();
}

/* Runs `SELECT <call>` through SPI as the current user; the functions check ownership. */
static void
run_call(const char *call)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s", call);
	SPI_connect();
	if (SPI_execute(sql.data, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "kcm: %s failed", sql.data);
	SPI_finish();
}

/* CREATE INDEX on a foreign table: created on its shard; false when it is not one. */
static bool
index_on_shard(IndexStmt *stmt)
{
	Oid			relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	StringInfoData call;
	ListCell   *cell;
	bool		first = true;

	if (!OidIsValid(relid) || get_rel_relkind(relid) != RELKIND_FOREIGN_TABLE)
		return false;
	initStringInfo(&call);
	appendStringInfo(&call, "kcm_ddl.create_index(%u::oid::regclass, %s, %s, ARRAY[", relid,
					 stmt->idxname ? quote_literal_cstr(stmt->idxname) : "NULL", stmt->unique ? "true" : "false");
	foreach(cell, stmt->indexParams)
	{
		IndexElem  *elem = (IndexElem *) lfirst(cell);

		if (elem->name == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("kcm: an index on a table of the shards names columns only; nothing was changed")));
		appendStringInfo(&call, "%s%s", first ? "" : ", ", quote_literal_cstr(elem->name));
		first = false;
	}
	appendStringInfoString(&call, "]::text[])");
	run_call(call.data);
	return true;
}

/* DROP INDEX of names no local index has: dropped on the shards; false when any is local. */
static bool
index_drop_on_shard(DropStmt *stmt)
{
	ListCell   *cell;

	foreach(cell, stmt->objects)
	{
		RangeVar   *rel = makeRangeVarFromNameList((List *) lfirst(cell));

		if (OidIsValid(RangeVarGetRelid(rel, NoLock, true)))
			return false;
	}
	foreach(cell, stmt->objects)
	{
		RangeVar   *rel = makeRangeVarFromNameList((List *) lfirst(cell));
		StringInfoData call;

		initStringInfo(&call);
		appendStringInfo(&call, "kcm_ddl.drop_index(%s, %s, %s)",
						 rel->schemaname ? quote_literal_cstr(rel->schemaname) : "NULL",
						 quote_literal_cstr(rel->relname), stmt->missing_ok ? "true" : "false");
		run_call(call.data);
	}
	return true;
}

/* Runs kcm_ddl.shard_databases(name, step): 'check', 'CREATE DATABASE' or 'DROP DATABASE'. */
static void
shard_databases(const char *name, const char *step)
{
	StringInfoData call;

	initStringInfo(&call);
	appendStringInfo(&call, "kcm_ddl.raise_refusal(kcm_ddl.shard_databases(%s, %s))", quote_literal_cstr(name), quote_literal_cstr(step));
	run_call(call.data);
}

/*
 * DROP DATABASE: the shards first, since PostgreSQL removes the files of a dropped database
 * before its transaction commits and cannot take the drop back; so everything PostgreSQL
 * would refuse is refused here before a shard is touched (not there, not the owner, the
 * current database, other sessions connected). Returns the statement to run, told to
 * tolerate the database being gone already (the catalog sync of this node may have seen
 * the shards without it and dropped it first).
 */
static PlannedStmt *
drop_database_on_shards(PlannedStmt *pstmt, DropdbStmt *stmt)
{
	Oid			dboid = get_database_oid(stmt->dbname, true);
	int			others,
				prepared;
	ListCell   *cell;
	bool		force = false;
	PlannedStmt *copy;

	if (!OidIsValid(dboid) || dboid == MyDatabaseId || !pg_database_ownercheck(dboid, GetUserId()))
		return pstmt;
	foreach(cell, stmt->options)
		if (strcmp(((DefElem *) lfirst(cell))->defname, "force") == 0)
			force = true;
	if (!force && CountOtherDBBackends(dboid, &others, &prepared))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("database \"%s\" is being accessed by other users", stmt->dbname),
				 errdetail("There are %d other session(s) and %d prepared transaction(s) using the database; nothing was changed.", others, prepared)));
	shard_databases(stmt->dbname, "DROP DATABASE");
	copy = copyObject(pstmt);
	((DropdbStmt *) copy->utilityStmt)->missing_ok = true;
	return copy;
}

static void
kcm_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					ProcessUtilityContext context, ParamListInfo params,
					QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (IsA(parsetree, AlterTableStmt) && !in_catalog_sync())
		note_partition_commands((AlterTableStmt *) parsetree);
	if (IsA(parsetree, AlterTableStmt) && !in_catalog_sync() && names_shard_table(((AlterTableStmt *) parsetree)->relation))
	{
		note_column_changes((AlterTableStmt *) parsetree);
		unroute_parent(((AlterTableStmt *) parsetree)->relation);
	}
	if (IsA(parsetree, RenameStmt) && ((RenameStmt *) parsetree)->renameType == OBJECT_COLUMN && !in_catalog_sync() &&
		((RenameStmt *) parsetree)->relation != NULL && names_shard_table(((RenameStmt *) parsetree)->relation))
		unroute_parent(((RenameStmt *) parsetree)->relation);
	if (context == PROCESS_UTILITY_TOPLEVEL && !in_catalog_sync())
	{
		const char *tag = reaches_shard(parsetree);

		if (tag != NULL)
		{
			require_ddl_reaches_shards(tag);
			PreventInTransactionBlock(true, tag);
		}
		if (IsA(parsetree, IndexStmt) && OidIsValid(RangeVarGetRelid(((IndexStmt *) parsetree)->relation, NoLock, true)) &&
			get_rel_relkind(RangeVarGetRelid(((IndexStmt *) parsetree)->relation, NoLock, true)) == RELKIND_FOREIGN_TABLE)
		{
			PreventInTransactionBlock(true, "CREATE INDEX");
			if (index_on_shard((IndexStmt *) parsetree))
				return;
		}
		if (IsA(parsetree, DropStmt) && ((DropStmt *) parsetree)->removeType == OBJECT_INDEX &&
			index_drop_on_shard((DropStmt *) parsetree))
			return;
		if (IsA(parsetree, CreateTableAsStmt) && ((CreateTableAsStmt *) parsetree)->objtype == OBJECT_TABLE &&
			((CreateTableAsStmt *) parsetree)->into->rel->relpersistence != RELPERSISTENCE_TEMP)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("kcm: CREATE TABLE AS and SELECT INTO are not carried to a shard; nothing was created"),
					 errhint("CREATE TABLE the table, then INSERT INTO it ... SELECT.")));
	}
	/* A CREATE TABLE run by a function or DO block is a user table too. */
	if (context != PROCESS_UTILITY_TOPLEVEL && !in_catalog_sync() && IsA(parsetree, CreateStmt) &&
		((CreateStmt *) parsetree)->relation->relpersistence != RELPERSISTENCE_TEMP)
		require_ddl_reaches_shards("CREATE TABLE");
	if (context == PROCESS_UTILITY_TOPLEVEL && !in_catalog_sync() && IsA(parsetree, CreatedbStmt))
	{
		const char *name = ((CreatedbStmt *) parsetree)->dbname;

		/* Refused before PostgreSQL makes the database when a shard is down or has the name. */
		PreventInTransactionBlock(true, "CREATE DATABASE");
		if (!OidIsValid(get_database_oid(name, true)))
			shard_databases(name, "check");
		if (previous_hook)
			previous_hook(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
		shard_databases(name, "CREATE DATABASE");
		give_new_database_shard_servers(name);
		return;
	}
	if (context == PROCESS_UTILITY_TOPLEVEL && !in_catalog_sync() && IsA(parsetree, DropdbStmt))
	{
		PlannedStmt *run = drop_database_on_shards(pstmt, (DropdbStmt *) parsetree);

		if (run != pstmt)
		{
			pstmt = run;
			readOnlyTree = false;
		}
	}
	if (IsA(parsetree, DropStmt) && ((DropStmt *) parsetree)->removeType == OBJECT_TABLE &&
		targets_are_foreign_tables((DropStmt *) parsetree))
	{
		/* The tree may be cached (a prepared statement): change a copy. */
		PlannedStmt *copy = copyObject(pstmt);

		((DropStmt *) copy->utilityStmt)->removeType = OBJECT_FOREIGN_TABLE;
		pstmt = copy;
		readOnlyTree = false;
	}
	if (previous_hook)
		previous_hook(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
}

/* mysql_fdw's plan for one foreign scan, built while the scan's tableoid columns are out of its sight. */
static ForeignScan *
plan_without_tableoid(PlannerInfo *root, RelOptInfo *rel, Oid relid, ForeignPath *path, List *tlist, List *clauses, Plan *outer)
{
	List	   *all = rel->reltarget->exprs;
	List	   *shown = NIL;
	ListCell   *cell;
	ForeignScan *plan;

	foreach(cell, all)
	{
		Node	   *expr = (Node *) lfirst(cell);

		if (IsA(expr, Var) && ((Var *) expr)->varattno == TableOidAttributeNumber)
			continue;			/* the executor fills it in from the scan's relation */
		shown = lappend(shown, expr);
	}
	rel->reltarget->exprs = shown;
	PG_TRY();
	{
		plan = mysql_get_foreign_plan(root, rel, relid, path, tlist, clauses, outer);
	}
	PG_FINALLY();
	{
		rel->reltarget->exprs = all;
	}
	PG_END_TRY();
	return plan;
}

static bool
is_mysql_fdw(Oid relid)
{
	ForeignDataWrapper *fdw = GetForeignDataWrapper(GetForeignServer(GetForeignServerIdByRelId(relid))->fdwid);
	char	   *handler = OidIsValid(fdw->fdwhandler) ? get_func_name(fdw->fdwhandler) : NULL;

	return handler != NULL && strcmp(handler, "mysql_fdw_handler") == 0;
}

static void
hide_tableoid_from_mysql_fdw(PlannerInfo *root, Oid relid, bool inhparent, RelOptInfo *rel)
{
	if (previous_relation_info)
		previous_relation_info(root, relid, inhparent, rel);
	/* rel->fdwroutine is the planner's own copy (GetFdwRoutineForRelation(..., true)). */
	if (rel->fdwroutine == NULL || rel->fdwroutine->GetForeignPlan == plan_without_tableoid || !is_mysql_fdw(relid))
		return;
	/* mysql_fdw is loaded by now: its connections are watched from the first statement on. */
	shard_transactions_bind();
	mysql_get_foreign_plan = rel->fdwroutine->GetForeignPlan;
	rel->fdwroutine->GetForeignPlan = plan_without_tableoid;
}

/*
 * mysql_fdw's ExecForeignDelete, given the row identity column (named after the table's
 * first column, mysqlAddForeignUpdateTargets) as the first of the plan's columns, which is
 * where it reads it (ExecGetJunkAttribute(planSlot, 1)).
 */
static TupleTableSlot *
delete_by_row_identity(EState *estate, ResultRelInfo *rinfo, TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	const char *rowid = NameStr(TupleDescAttr(RelationGetDescr(rinfo->ri_RelationDesc), 0)->attname);
	TupleDesc	one;
	TupleTableSlot *identity;
	TupleTableSlot *result;

	if (delete_rowid_attno <= 1 || strcmp(rowid, delete_rowid_name) != 0)
		return mysql_exec_foreign_delete(estate, rinfo, slot, planSlot);
	one = CreateTemplateTupleDesc(1);
	TupleDescCopyEntry(one, 1, planSlot->tts_tupleDescriptor, delete_rowid_attno);
	identity = MakeSingleTupleTableSlot(one, &TTSOpsVirtual);
	identity->tts_values[0] = slot_getattr(planSlot, delete_rowid_attno, &identity->tts_isnull[0]);
	ExecStoreVirtualTuple(identity);
	result = mysql_exec_foreign_delete(estate, rinfo, slot, identity);
	ExecDropSingleTupleTableSlot(identity);
	return result;
}

/*
 * The DELETE of every mysql_fdw result relation of this statement goes through
 * delete_by_row_identity, told where the row identity column is in the plan's output (the
 * plan's rows come straight from each partition's scan, whose columns carry no names).
 */
static void
wrap_foreign_deletes(QueryDesc *queryDesc)
{
	ModifyTableState *mt;

	if (queryDesc->operation != CMD_DELETE || queryDesc->planstate == NULL || !IsA(queryDesc->planstate, ModifyTableState))
		return;
	mt = (ModifyTableState *) queryDesc->planstate;
	for (int i = 0; i < mt->mt_nrels; i++)
	{
		ResultRelInfo *rinfo = &mt->resultRelInfo[i];
		const char *rowid = NameStr(TupleDescAttr(RelationGetDescr(rinfo->ri_RelationDesc), 0)->attname);

		/* ri_FdwRoutine is this executor's own copy (GetFdwRoutineForRelation(..., true)). */
		if (rinfo->ri_FdwRoutine == NULL || rinfo->ri_FdwRoutine->ExecForeignDelete == NULL ||
			rinfo->ri_FdwRoutine->ExecForeignDelete == delete_by_row_identity || !is_mysql_fdw(RelationGetRelid(rinfo->ri_RelationDesc)))
			continue;
		strlcpy(delete_rowid_name, rowid, NAMEDATALEN);
		delete_rowid_attno = ExecFindJunkAttributeInTlist(outerPlanState(mt)->plan->targetlist, rowid);
		mysql_exec_foreign_delete = rinfo->ri_FdwRoutine->ExecForeignDelete;
		rinfo->ri_FdwRoutine->ExecForeignDelete = delete_by_row_identity;
	}
}

/* UPDATE through a parent kcm routes (it has an INSTEAD rule on INSERT) that assigns to its partition key: refused. */
static void
refuse_partition_key_update(PlannedStmt *stmt)
{
	ModifyTable *modify;
	RangeTblEntry *rte;
	Relation	parent;
	bool		routed = false;

	if (stmt->commandType != CMD_UPDATE || stmt->planTree == NULL || !IsA(stmt->planTree, ModifyTable))
		return;
	modify = (ModifyTable *) stmt->planTree;
	if (modify->rootRelation == 0)
		return;
	rte = rt_fetch(modify->rootRelation, stmt->rtable);
	if (rte->relkind != RELKIND_PARTITIONED_TABLE)
		return;
	parent = table_open(rte->relid, NoLock);
	if (parent->rd_rules != NULL)
		for (int i = 0; i < parent->rd_rules->numLocks; i++)
			if (parent->rd_rules->rules[i]->event == CMD_INSERT && parent->rd_rules->rules[i]->isInstead)
				routed = true;
	if (routed)
	{
		PartitionKey key = RelationGetPartitionKey(parent);

		for (int i = 0; i < key->partnatts; i++)
			if (key->partattrs[i] == 0 || bms_is_member(key->partattrs[i] - FirstLowInvalidHeapAttributeNumber, rte->updatedCols))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("kcm: an UPDATE through %s may not change its partition key; nothing was changed", RelationGetRelationName(parent)),
						 errhint("DELETE the row and INSERT it again.")));
	}
	table_close(parent, NoLock);
}

/* A write into one foreign table that is a partition: what kcm's routing rules run. */
static bool
writes_foreign_partition(PlannedStmt *stmt)
{
	Oid			relid;

	if (stmt->commandType != CMD_INSERT && stmt->commandType != CMD_UPDATE && stmt->commandType != CMD_DELETE)
		return false;
	if (list_length(stmt->resultRelations) != 1)
		return false;
	relid = rt_fetch(linitial_int(stmt->resultRelations), stmt->rtable)->relid;
	return get_rel_relkind(relid) == RELKIND_FOREIGN_TABLE && get_rel_relispartition(relid);
}

/* A write that does not set the tag counts nothing in es_processed unless its node is told to. */
static void
count_rows_of_every_action(QueryDesc *queryDesc, int eflags)
{
	refuse_partition_key_update(queryDesc->plannedstmt);
	shard_holds_enter(queryDesc, eflags);
	shard_transactions_join(queryDesc, eflags);
	if (previous_start)
		previous_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
	wrap_foreign_deletes(queryDesc);
	if (!queryDesc->plannedstmt->canSetTag && writes_foreign_partition(queryDesc->plannedstmt) &&
		queryDesc->planstate != NULL && IsA(queryDesc->planstate, ModifyTableState))
		((ModifyTableState *) queryDesc->planstate)->canSetTag = true;
}

/*
 * A statement rewritten by the routing rules runs one query per partition; PostgreSQL
 * reports the rows of the one that sets the tag (the last) only. The rows of the others are
 * carried into it, so `INSERT INTO parent ...` reports every row it wrote.
 */
static void
count_routed_rows(QueryDesc *queryDesc, ScanDirection direction, uint64 count, bool execute_once)
{
	if (previous_run)
		previous_run(queryDesc, direction, count, execute_once);
	else
		standard_ExecutorRun(queryDesc, direction, count, execute_once);
	if (!writes_foreign_partition(queryDesc->plannedstmt))
	{
		if (queryDesc->plannedstmt->canSetTag)
			routed_rows = 0;
		return;
	}
	if (!queryDesc->plannedstmt->canSetTag)
		routed_rows += queryDesc->estate->es_processed;
	else
	{
		queryDesc->estate->es_processed += routed_rows;
		routed_rows = 0;
	}
}

/* Item 10; kcm's own sessions (kcm.sync) are left alone, as by every other hook here. */
static void
check_routed_insert(ParseState *pstate, Query *query, JumbleState *jstate)
{
	if (previous_post_parse_analyze)
		previous_post_parse_analyze(pstate, query, jstate);
	if (!in_catalog_sync())
		refuse_volatile_routed_insert(query);
}

/* A statement that failed half-way must not lend its rows to the next one. */
static void
forget_routed_rows(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_COMMIT)
		routed_rows = 0;
}

static void
forget_routed_rows_sub(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		routed_rows = 0;
}

void
_PG_init(void)
{
	DefineCustomBoolVariable("kcm.sync",
							 "Marks kcm's own catalog changes, which kcm_ddl does not carry to the shards.",
							 "Only superusers (the kcm agent) may set it.",
							 &catalog_sync, false, PGC_SUSET, 0, NULL, NULL, NULL);
	previous_hook = ProcessUtility_hook;
	ProcessUtility_hook = kcm_process_utility;
	previous_post_parse_analyze = post_parse_analyze_hook;
	post_parse_analyze_hook = check_routed_insert;
	previous_relation_info = get_relation_info_hook;
	get_relation_info_hook = hide_tableoid_from_mysql_fdw;
	previous_start = ExecutorStart_hook;
	ExecutorStart_hook = count_rows_of_every_action;
	previous_run = ExecutorRun_hook;
	ExecutorRun_hook = count_routed_rows;
	RegisterXactCallback(forget_routed_rows, NULL);
	RegisterSubXactCallback(forget_routed_rows_sub, NULL);
	shard_transactions_init();
	shard_holds_init();
}
