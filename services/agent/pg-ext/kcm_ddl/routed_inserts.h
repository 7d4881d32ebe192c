/* routed_inserts.c: INSERTs through a partitioned parent kcm routes that its rule would write wrongly. */
#ifndef KCM_ROUTED_INSERTS_H
#define KCM_ROUTED_INSERTS_H

#include "nodes/parsenodes.h"

/*
 * Called with every statement once it is parse-analyzed, before the routing rule rewrites
 * it: refuses (SQLSTATE 0A000, before anything is written) an INSERT into a partitioned
 * parent kcm routes whose rows would come out differently in each partition's action:
 * a volatile expression for a partition key column, or a volatile function anywhere in a
 * SELECT or WITH query that supplies the rows; either of them reading the parent or one of
 * its partitions. Anything else is left alone, including volatile expressions for other
 * columns of INSERT ... VALUES and parameters ($1).
 */
extern void refuse_volatile_routed_insert(Query *query);

#endif
