/*
 * shard_holds.c: a compute node rides through a change of a shard's master (docs/ride-through.md).
 * A hold (set by the manager, through the agent, before a planned switch or as a failover
 * starts) makes new statements for that shard wait until it is released or its own
 * deadline passes; open shard transactions get a bounded drain; a lost master's connection
 * is found dead before a statement is sent on it, and a connect that fails waits for the
 * shard's foreign server to be re-pointed.
 */
#ifndef KCM_SHARD_HOLDS_H
#define KCM_SHARD_HOLDS_H

#include "executor/execdesc.h"

typedef struct st_mysql MYSQL;

/* From _PG_init: the kcm.shard_wait_ms setting; the shared state when preloaded. */
extern void shard_holds_init(void);
/*
 * Before a statement's executor starts: waits while a shard it names is held (new work
 * only: a shard this transaction already works on goes on through the drain), then
 * replaces a shard connection found dead. Raises for a transaction the drain ended.
 */
extern void shard_holds_enter(QueryDesc *queryDesc, int eflags);
/* At PRE_COMMIT of a transaction with an open shard transaction: raises if a drain ended it. */
extern void shard_holds_before_commit(bool has_shard_transaction);
/* True when a drain ended this backend's transaction (for the wording of a lost connection). */
extern bool shard_holds_ended_by_switch(void);
/*
 * A connect to host:port failed in the way a dead master fails: waits (bounded) for the
 * shard server naming that address to be re-pointed or its hold to end, and connects there.
 * NULL when the address is no kcm shard server's; raises when no new master came in time.
 */
extern MYSQL *shard_holds_follow_master(MYSQL *conn, const char *host, unsigned int port, const char *user,
										const char *passwd, const char *db, const char *unix_socket, unsigned long flags);

#endif
