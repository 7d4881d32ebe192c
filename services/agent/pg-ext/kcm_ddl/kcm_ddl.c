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
 *    what the compute node forgot. The agent's catalog sync (kcm.sync = on) is exempt: its
 *    changes are local only.
 * 3. CREATE TABLE AS / SELECT INTO would fill a local table that is then replaced by an
 *    empty foreign one: refused, with the two statements that do it.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "nodes/parsenodes.h"
#include "access/xact.h"
#include "tcop/utility.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

PG_MODULE_MAGIC;

void _PG_init(void);

static ProcessUtility_hook_type previous_hook = NULL;

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

static bool
names_foreign_table(RangeVar *rel)
{
	Oid			relid = RangeVarGetRelid(rel, NoLock, true);

	return OidIsValid(relid) && get_rel_relkind(relid) == RELKIND_FOREIGN_TABLE;
}

static bool
in_catalog_sync(void)
{
	const char *value = GetConfigOption("kcm.sync", true, false);

	return value != NULL && strcmp(value, "on") == 0;
}

/* The command tag when this statement reaches a shard, NULL when it stays on this node. */
static const char *
reaches_shard(Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
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
			return names_foreign_table(((AlterTableStmt *) parsetree)->relation) ? "ALTER TABLE" : NULL;
		case T_RenameStmt:
			{
				RenameStmt *rename = (RenameStmt *) parsetree;

				return rename->relation != NULL && names_foreign_table(rename->relation) ? "ALTER TABLE" : NULL;
			}
		default:
			return NULL;
	}
}

static void
kcm_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					ProcessUtilityContext context, ParamListInfo params,
					QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (context == PROCESS_UTILITY_TOPLEVEL && !in_catalog_sync())
	{
		const char *tag = reaches_shard(parsetree);

		if (tag != NULL)
			PreventInTransactionBlock(true, tag);
		if (IsA(parsetree, CreateTableAsStmt) && ((CreateTableAsStmt *) parsetree)->objtype == OBJECT_TABLE &&
			((CreateTableAsStmt *) parsetree)->into->rel->relpersistence != RELPERSISTENCE_TEMP)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("kcm: CREATE TABLE AS and SELECT INTO are not carried to a shard; nothing was created"),
					 errhint("CREATE TABLE the table, then INSERT INTO it ... SELECT.")));
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

void
_PG_init(void)
{
	previous_hook = ProcessUtility_hook;
	ProcessUtility_hook = kcm_process_utility;
}
