/*
 * kcm_ddl: the one thing the event triggers of kcm_ddl--1.0.sql cannot do.
 *
 * Tables made through a compute node are foreign tables (their rows live on a shard), and
 * PostgreSQL refuses `DROP TABLE` on a foreign table before any event trigger runs. A
 * user of the cluster writes `DROP TABLE t`, as the reference system's own checks do, so
 * this ProcessUtility_hook turns a DROP TABLE whose every existing target is a foreign
 * table into DROP FOREIGN TABLE. The sql_drop event trigger then removes the table from
 * its shard in the same statement. Loaded through shared_preload_libraries.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
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

static void
kcm_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					ProcessUtilityContext context, ParamListInfo params,
					QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

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
