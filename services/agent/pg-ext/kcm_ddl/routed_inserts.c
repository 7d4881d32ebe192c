/*
 * An INSERT through a partitioned parent kcm routes is rewritten by its INSTEAD rule
 * (kcm_ddl.route_rows, sql/20-partitions.sql) into one query per partition, each of which
 * evaluates the statement's rows anew and keeps those that belong to its partition. Whatever
 * gives a different answer each time it is evaluated therefore gives each partition's query
 * different rows: nextval(), random() or gen_random_uuid() for a partition key column puts
 * a row into no partition, or into several with different keys; a volatile function in the
 * SELECT (or WITH query) supplying the rows (ORDER BY random() LIMIT 5, WHERE random() < 0.5)
 * has each partition take its rows from a different draw. And each partition's query sees
 * the rows the ones before it wrote: a SELECT that reads the parent (or one of its
 * partitions) writes a row again when a copy of it reaches a later partition
 * (`INSERT INTO t SELECT id + 1000, v FROM t`), and so does `(SELECT max(id) + 1 FROM t)`
 * for the key. Such an INSERT is refused here, right after parse analysis, before the rule
 * has rewritten it and before anything is written.
 *
 * Left alone, because every partition's query sees the same value: constants, parameters
 * ($1 of a prepared statement), stable functions (now()), and a volatile expression for a
 * column that is not in the partition key of INSERT ... VALUES: only the one query whose
 * partition takes that row evaluates it.
 *
 * PostgreSQL analyzes the statement an EXPLAIN names in ExplainQuery, which calls this hook
 * too: EXPLAIN [ANALYZE] of such an INSERT is refused as the INSERT is.
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_proc.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "rewrite/rewriteSupport.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/partcache.h"
#include "utils/rel.h"

#include "routed_inserts.h"

/* A partitioned table whose INSERTs kcm routes: it has kcm's rule, or a foreign partition. */
static bool
is_routed_parent(Relation rel)
{
	ListCell   *cell;

	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		return false;
	if (OidIsValid(get_rewrite_oid(RelationGetRelid(rel), "kcm_route_insert", true)))
		return true;
	foreach(cell, find_all_inheritors(RelationGetRelid(rel), NoLock, NULL))
		if (get_rel_relkind(lfirst_oid(cell)) == RELKIND_FOREIGN_TABLE)
			return true;
	return false;
}

/* The attribute numbers of the parent's partition key columns (those an expression key names, too). */
static Bitmapset *
partition_key_columns(Relation rel)
{
	PartitionKey key = RelationGetPartitionKey(rel);
	Bitmapset  *named = NULL;
	Bitmapset  *columns = NULL;
	int			attno = -1;

	for (int i = 0; i < key->partnatts; i++)
		if (key->partattrs[i] != 0)
			columns = bms_add_member(columns, key->partattrs[i]);
	pull_varattnos((Node *) key->partexprs, 1, &named);
	while ((attno = bms_next_member(named, attno)) >= 0)
		if (attno + FirstLowInvalidHeapAttributeNumber > 0)
			columns = bms_add_member(columns, attno + FirstLowInvalidHeapAttributeNumber);
	return columns;
}

static bool
note_volatile_function(Oid func_id, void *context)
{
	if (func_volatile(func_id) != PROVOLATILE_VOLATILE)
		return false;
	*(Oid *) context = func_id;
	return true;
}

/* contain_volatile_functions' walk, remembering the function it found (NextValueExpr is nextval). */
static bool
find_volatile_function(Node *node, Oid *found)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, note_volatile_function, found))
		return true;
	if (IsA(node, NextValueExpr))
	{
		*found = F_NEXTVAL;
		return true;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, find_volatile_function, found, 0);
	return expression_tree_walker(node, find_volatile_function, found);
}

/* The name of a volatile function `node` calls, NULL when it calls none. */
static const char *
volatile_function_in(Node *node)
{
	Oid			found = InvalidOid;
	char	   *name;

	if (!contain_volatile_functions(node))
		return NULL;
	if (!find_volatile_function(node, &found) || (name = get_func_name(found)) == NULL)
		return "function";
	return name;
}

typedef struct RelationRead
{
	List	   *relids;			/* the parent and its partitions */
	Oid			found;			/* the one read */
} RelationRead;

static bool
find_relation_read(Node *node, RelationRead *read)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind != RTE_RELATION || !list_member_oid(read->relids, rte->relid))
			return false;
		read->found = rte->relid;
		return true;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, find_relation_read, read, QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, find_relation_read, read);
}

/* The qualified name of the parent, or the partition of it, that `node` reads by name; NULL when it reads neither. */
static const char *
parent_read_in(Node *node, Relation rel)
{
	RelationRead read = {find_all_inheritors(RelationGetRelid(rel), NoLock, NULL), InvalidOid};

	if (!find_relation_read(node, &read))
		return NULL;
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(read.found)), get_rel_name(read.found));
}

static const char *
parent_name(Relation rel)
{
	return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)), RelationGetRelationName(rel));
}

/* Refuses the INSERT when `value`, given for partition key column `attno` (DEFAULT: its default), is volatile or reads the parent. */
static void
check_key_value(Relation rel, AttrNumber attno, Node *value)
{
	const char *function;
	const char *read;

	if (value == NULL || IsA(value, SetToDefault))
		value = build_column_default(rel, attno);
	function = volatile_function_in(value);
	if (function != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("kcm: INSERT into partitioned table %s evaluates its rows once per partition, so the volatile %s() in partition key column %s would differ between partitions; "
						"compute the values first (SELECT %s(...) into a variable, or fill a temporary table and INSERT ... SELECT from it); nothing was written",
						parent_name(rel), function, get_attname(RelationGetRelid(rel), attno, false), function)));
	read = parent_read_in(value, rel);
	if (read != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("kcm: INSERT into partitioned table %s evaluates its rows once per partition, and partition key column %s reads %s, so each partition would see the rows written before it; "
						"compute the values first (SELECT ... into a variable, or fill a temporary table and INSERT ... SELECT from it); nothing was written",
						parent_name(rel), get_attname(RelationGetRelid(rel), attno, false), read)));
}

/* Refuses the INSERT when `source` (its SELECT, or a WITH query) calls a volatile function or reads the parent. */
static void
check_row_source(Relation rel, Node *source, const char *what)
{
	const char *function = volatile_function_in(source);
	const char *read;

	if (function != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("kcm: INSERT into partitioned table %s evaluates its %s once per partition, so the volatile %s() in it would give each partition different rows; "
						"fill a temporary table with the rows first (CREATE TEMP TABLE ... AS SELECT ...), then INSERT INTO %s SELECT from it; nothing was written",
						parent_name(rel), what, function, parent_name(rel))));
	read = parent_read_in(source, rel);
	if (read != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("kcm: INSERT into partitioned table %s evaluates its %s once per partition, and it reads %s, so each partition would see the rows written before it and write them again; "
						"fill a temporary table with the rows first (CREATE TEMP TABLE ... AS SELECT ...), then INSERT INTO %s SELECT from it; nothing was written",
						parent_name(rel), what, read, parent_name(rel))));
}

/* The VALUES list of a multi-row INSERT ... VALUES, or NULL; `rtindex` is set to its range table index. */
static RangeTblEntry *
values_source(Query *query, Index *rtindex)
{
	FromExpr   *from = query->jointree;
	RangeTblEntry *rte;

	if (from == NULL || list_length(from->fromlist) != 1 || !IsA(linitial(from->fromlist), RangeTblRef))
		return NULL;
	*rtindex = ((RangeTblRef *) linitial(from->fromlist))->rtindex;
	rte = rt_fetch(*rtindex, query->rtable);
	return rte->rtekind == RTE_VALUES ? rte : NULL;
}

/* The value given for each partition key column: in each row of a multi-row VALUES, else the target list's. */
static void
check_key_values(Query *query, Relation rel)
{
	Bitmapset  *keys = partition_key_columns(rel);
	Bitmapset  *given = NULL;
	Index		values_index = 0;
	RangeTblEntry *values = values_source(query, &values_index);
	ListCell   *cell;
	int			attno = -1;

	foreach(cell, query->targetList)
	{
		TargetEntry *entry = (TargetEntry *) lfirst(cell);
		Bitmapset  *columns = NULL;
		int			column = -1;
		ListCell   *row;

		if (entry->resjunk || !bms_is_member(entry->resno, keys))
			continue;
		given = bms_add_member(given, entry->resno);
		if (values == NULL)
		{
			check_key_value(rel, entry->resno, (Node *) entry->expr);
			continue;
		}
		/* The target list reads the VALUES list's columns; the expressions are in its rows. */
		pull_varattnos((Node *) entry->expr, values_index, &columns);
		while ((column = bms_next_member(columns, column)) >= 0)
			foreach(row, values->values_lists)
				if (column + FirstLowInvalidHeapAttributeNumber > 0)
					check_key_value(rel, entry->resno, list_nth((List *) lfirst(row), column + FirstLowInvalidHeapAttributeNumber - 1));
	}
	/* A key column left out takes its default (an identity column's is nextval). */
	while ((attno = bms_next_member(keys, attno)) >= 0)
		if (!bms_is_member(attno, given))
			check_key_value(rel, attno, NULL);
}

void
refuse_volatile_routed_insert(Query *query)
{
	Relation	rel;
	ListCell   *cell;

	if (query->commandType != CMD_INSERT || query->resultRelation == 0)
		return;
	/* Parse analysis holds the target's lock. */
	rel = table_open(rt_fetch(query->resultRelation, query->rtable)->relid, NoLock);
	if (is_routed_parent(rel))
	{
		check_row_source(rel, (Node *) query->cteList, "WITH query");
		foreach(cell, query->rtable)
			if (((RangeTblEntry *) lfirst(cell))->rtekind == RTE_SUBQUERY)
				check_row_source(rel, (Node *) ((RangeTblEntry *) lfirst(cell))->subquery, "SELECT");
		check_key_values(query, rel);
	}
	table_close(rel, NoLock);
}
