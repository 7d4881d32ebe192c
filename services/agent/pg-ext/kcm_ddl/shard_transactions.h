/* shard_transactions.c: a compute node's transaction is a transaction on every shard it touches. */
#ifndef KCM_SHARD_TRANSACTIONS_H
#define KCM_SHARD_TRANSACTIONS_H

#include "executor/execdesc.h"
#include "foreign/foreign.h"
#include "nodes/plannodes.h"

/* Before a statement runs: the shard connections it will use join the transaction. */
extern void shard_transactions_join(QueryDesc *queryDesc, int eflags);
/* Once mysql_fdw is loaded (its first table planned): every connection it closes is reported here. */
extern void shard_transactions_bind(void);
/* Each foreign table a planned statement reaches: its range table's, and a write's partitions (rows routed at run time). */
typedef void (*foreign_table_visitor) (Oid relid, Oid userid, void *arg);
extern void shard_transactions_each_foreign_table(PlannedStmt *stmt, foreign_table_visitor visit, void *arg);
/* True for a foreign server of mysql_fdw. */
extern bool shard_transactions_is_mysql_server(ForeignServer *server);
/* From _PG_init: the setting and the transaction callbacks. */
extern void shard_transactions_init(void);

#endif
